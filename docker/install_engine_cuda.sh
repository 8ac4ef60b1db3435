#!/usr/bin/env bash
# deps stage, cuda flavour: torch (PyPI's torch is the CUDA 13.0 build), vLLM, FlashInfer and the CUDA compiler with
# its headers (cuda-toolkit's nvcc and cccl extras, the toolkit release torch itself pins), all from the package
# registry at the Dockerfile's build arguments, everything under them at the lock's versions (CONSTRAINTS:
# docker/cuda-constraints.txt, `make cuda-lock`). Then docker/cuda_home.sh lays the wheels out as a CUDA_HOME.
#   usage: install_engine_cuda.sh PYTHON
set -euo pipefail

PY=${1:?usage: install_engine_cuda.sh PYTHON}
: "${VLLM_VERSION:?}" "${TORCH_VERSION:?}" "${FLASHINFER_VERSION:?}" "${TRANSFORMERS_VERSION:?}"
: "${CUDA_TOOLKIT_VERSION:?}" "${CONSTRAINTS:?}"

"$PY" -m pip install --constraint "$CONSTRAINTS" "torch==${TORCH_VERSION}" "vllm==${VLLM_VERSION}" \
    "flashinfer-python==${FLASHINFER_VERSION}" "transformers==${TRANSFORMERS_VERSION}" \
    "cuda-toolkit[nvcc,cccl]==${CUDA_TOOLKIT_VERSION}"
bash "$(dirname "$0")/cuda_home.sh" "$PY" /opt/cuda
