#!/usr/bin/env bash
# project stage: install the project as a regular package (not editable) and lay out its data.
#   usage: install_project.sh SRC_DIR PREFIX
#     SRC_DIR  a copy of the project (pyproject.toml, entrypoint/, kernels/, sagemaker_deploy/);
#              removed afterwards when REMOVE_SRC=1 (the default in the image)
#     PREFIX   where the image keeps its data: PREFIX/kernel-configs gets kernels/configs/*.json, PREFIX/tiny-moe
#              the tiny MoE model (1.3 MB; served when MOE_SERVING_FALLBACK_MODEL points at it and nothing is
#              mounted at /opt/ml/model, as in the cpu flavour)
# Dependencies are already installed (install_deps.sh), hence --no-deps; no build isolation, so
# no network is needed for setuptools.
set -euo pipefail

SRC=${1:?usage: install_project.sh SRC_DIR PREFIX}
PREFIX=${2:?usage: install_project.sh SRC_DIR PREFIX}
PY=${PYTHON:-python3}

"$PY" -m pip install --no-cache-dir --no-deps --no-build-isolation "$SRC"

# vLLM reads tuned MoE configs from VLLM_TUNED_CONFIG_FOLDER: a fixed path, independent of the
# Python version in site-packages.
mkdir -p "$PREFIX/kernel-configs"
shopt -s nullglob
configs=("$SRC"/kernels/configs/*.json)
if ((${#configs[@]})); then
    cp "${configs[@]}" "$PREFIX/kernel-configs/"
fi
echo "kernel configs: ${#configs[@]} file(s) in $PREFIX/kernel-configs"

# The installed package must import from outside the source tree (no accidental cwd import).
(cd / && "$PY" -m entrypoint --help >/dev/null)
(cd / && "$PY" -m entrypoint.model.tiny_model "$PREFIX/tiny-moe")

if [[ ${REMOVE_SRC:-1} == 1 ]]; then
    rm -rf "$SRC"
fi
