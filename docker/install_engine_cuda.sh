#!/usr/bin/env bash
# deps stage, cuda flavour: torch (CUDA 13.0 build), vLLM and FlashInfer, at the Dockerfile's build arguments.
# Not executed on the development or CI machines (5 GB of CUDA wheels); CI resolves the same pins with pip for
# Python 3.12 instead (tests/image/test_cuda_pins.py), which fails on a conflict.
#   usage: install_engine_cuda.sh PYTHON
set -euo pipefail

PY=${1:?usage: install_engine_cuda.sh PYTHON}
: "${VLLM_VERSION:?}" "${TORCH_VERSION:?}" "${TORCH_INDEX_URL:?}" "${FLASHINFER_VERSION:?}" "${TRANSFORMERS_VERSION:?}"

# torch first, from the index that carries the cu130 build; the torch pin in the next step keeps
# pip from replacing it with another CUDA flavour while resolving vLLM.
"$PY" -m pip install "torch==${TORCH_VERSION}" --index-url "$TORCH_INDEX_URL"
"$PY" -m pip install "torch==${TORCH_VERSION}" "vllm==${VLLM_VERSION}" "flashinfer-python==${FLASHINFER_VERSION}" \
  "transformers==${TRANSFORMERS_VERSION}"
