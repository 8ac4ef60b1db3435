#!/usr/bin/env bash
# What tests/kernels/test_aot.py and the ops compile tests need to compile vLLM 0.26's fused-MoE Triton kernel
# for sm_90 without a GPU,
# exactly as the image will (docker/aot_cache.sh):
#   build/triton-3.6.0/            Triton 3.6.0 (the image's: torch 2.11 pins it), installed with --target
#   build/vllm-0.26.0/fused_moe.py the kernel source from the vllm==0.26.0 wheel (the image's vLLM)
#   build/vllm-0.26.0/configs/     vLLM's own H200 tile files from that wheel: vLLM loads one when we ship
#                                  none for a shape (DeepSeek-V3 TP8), so the bake compiles those tiles too
# The CPU venv's own Triton (3.9, from torch 2.13) would compute different cache keys.
set -euo pipefail
PY=${PY:-.venv/bin/python}
BUILD=${BUILD:-build}
TRITON_DIR="$BUILD/triton-3.6.0"
VLLM_DIR="$BUILD/vllm-0.26.0"

quiet_pip() { grep -v "is ignored" || true; }

if [ ! -f "$TRITON_DIR/.stamp" ]; then
  rm -rf "$TRITON_DIR"
  # pip's many "Location ... is ignored" warnings are filtered; pip's own exit status decides (pipefail).
  if ! "$PY" -m pip install -q --no-deps --no-compile --target "$TRITON_DIR" triton==3.6.0 2>&1 | quiet_pip; then
    echo "setup_aot_env: pip could not install triton==3.6.0 into $TRITON_DIR" >&2
    exit 1
  fi
  "$PY" -c "import sys; sys.path.insert(0, '$TRITON_DIR'); import triton; assert triton.__version__ == '3.6.0', triton.__version__"
  touch "$TRITON_DIR/.stamp"
fi

if [ ! -f "$VLLM_DIR/fused_moe.py" ] || [ ! -f "$VLLM_DIR/configs/.stamp" ]; then
  mkdir -p "$VLLM_DIR"
  wheel=$(find "$HOME/.cache/offline-vllm-0.26.0/whl" -name "vllm-0.26.0-*.whl" 2>/dev/null | head -1 || true)
  if [ -z "$wheel" ]; then
    tmp=$(mktemp -d)
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --platform manylinux_2_28_x86_64 -d "$tmp" vllm==0.26.0 2>&1 | quiet_pip || true  # checked below
    wheel=$(find "$tmp" -name "vllm-0.26.0-*.whl" | head -1)
  fi
  [ -n "$wheel" ] || { echo "setup_aot_env: could not download the vllm==0.26.0 wheel (needed for its fused_moe.py)" >&2; exit 1; }
  "$PY" - "$wheel" "$VLLM_DIR" <<'PYEOF'
import pathlib, sys, zipfile
root = "vllm/model_executor/layers/fused_moe/"
out = pathlib.Path(sys.argv[2])
(out / "configs").mkdir(parents=True, exist_ok=True)
with zipfile.ZipFile(sys.argv[1]) as wheel:
    (out / "fused_moe.py").write_bytes(wheel.read(root + "fused_moe.py"))
    for name in wheel.namelist():
        if name.startswith(root + "configs/") and "device_name=NVIDIA_H200" in name:
            (out / "configs" / name.rsplit("/", 1)[1]).write_bytes(wheel.read(name))
(out / "configs" / ".stamp").touch()
PYEOF
  [ -z "${tmp:-}" ] || rm -rf "$tmp"
fi
echo "aot env ready: $TRITON_DIR, $VLLM_DIR/fused_moe.py, $(find "$VLLM_DIR/configs" -name '*.json' | wc -l) vLLM H200 tile files"
