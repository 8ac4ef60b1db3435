#!/usr/bin/env bash
# deps stage: torch (CUDA 13.0 build), vLLM, FlashInfer, then the project's own runtime dependencies
# read from pyproject.toml. Versions come from the Dockerfile's documented build arguments.
#   usage: install_deps.sh PYPROJECT_TOML
set -euo pipefail

PYPROJECT=${1:?usage: install_deps.sh PYPROJECT_TOML}
PY=${PYTHON:-python3}
: "${VLLM_VERSION:?}" "${TORCH_VERSION:?}" "${TORCH_INDEX_URL:?}" "${FLASHINFER_VERSION:?}"

# torch first, from the index that carries the cu130 build; the torch pin in the next step keeps
# pip from replacing it with another CUDA flavour while resolving vLLM.
"$PY" -m pip install "torch==${TORCH_VERSION}" --index-url "$TORCH_INDEX_URL"
"$PY" -m pip install "torch==${TORCH_VERSION}" "vllm==${VLLM_VERSION}" "flashinfer-python==${FLASHINFER_VERSION}"

# setuptools + wheel: install_project.sh builds the project without build isolation.
"$PY" -m pip install "setuptools>=69,<81" "wheel>=0.43"

mapfile -t reqs < <("$PY" "$(dirname "$0")/project_requirements.py" "$PYPROJECT")
"$PY" -m pip install "torch==${TORCH_VERSION}" "${reqs[@]}"

# Fail the build here, not at the first request, if the engine does not import.
"$PY" -c "import importlib.metadata as m; print('vllm', m.version('vllm'), 'torch', m.version('torch'))"
