#!/usr/bin/env bash
# deps stage, cuda flavour: torch (CUDA 13.0 build), vLLM and FlashInfer, at the Dockerfile's build arguments, with
# everything under them at the lock's versions (CONSTRAINTS: docker/cuda-constraints.txt, `make cuda-lock`).
# Not executed on the development or CI machines (5 GB of CUDA wheels); CI resolves the same pins under the lock with
# pip for Python 3.12 instead (tests/image/test_cuda_pins.py), which fails on a conflict or a stale lock.
#   usage: install_engine_cuda.sh PYTHON
set -euo pipefail

PY=${1:?usage: install_engine_cuda.sh PYTHON}
: "${VLLM_VERSION:?}" "${TORCH_VERSION:?}" "${TORCH_INDEX_URL:?}" "${FLASHINFER_VERSION:?}" "${TRANSFORMERS_VERSION:?}"
: "${CONSTRAINTS:?}"

# torch first, from the index that carries the cu130 build; the torch pin in the next step keeps
# pip from replacing it with another CUDA flavour while resolving vLLM. That index carries only some versions of
# torch's own dependencies, so the lock applies from the next step on: pip moves any of them to the lock's version
# there (torch pins its nvidia-* wheels exactly, the same on both indexes).
"$PY" -m pip install "torch==${TORCH_VERSION}" --index-url "$TORCH_INDEX_URL"
"$PY" -m pip install --constraint "$CONSTRAINTS" "torch==${TORCH_VERSION}" "vllm==${VLLM_VERSION}" \
  "flashinfer-python==${FLASHINFER_VERSION}" "transformers==${TRANSFORMERS_VERSION}"
