#!/usr/bin/env bash
# FlashInfer's SM90 CUTLASS fused-MoE module for the device host, pruned to FP8 x FP8 -> BF16 (fused_moe_90.py says
# why and what): built inside the cuda image (its FlashInfer 0.7.0.post1, nvcc 13.0 wheels and CUDA_HOME), written to
# OUT/fused_moe_90.so.xz, and split into the upload folder .offline/moe90 (git-ignored, one upload).
# host_install.sh installs it as FlashInfer's prebuilt module when the pieces folder holds it.
#   usage: build_fused_moe_90.sh [OUT]      (default ~/.cache/h200-bundle/moe90; an OUT/fused_moe_90.so already there
#          is kept: delete it to build again, which starts over, since write_ninja rewrites the generated sources)
#   env:   IMAGE (default moe-serving:latest), JOBS (default: the CPU count), DOCKER (default docker)
# Measured on a 2-core machine: see benchmarks/device/offline_engine/README.md ("FlashInfer CUTLASS for auto rows").
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-$HOME/.cache/h200-bundle/moe90}
IMAGE=${IMAGE:-moe-serving:latest}
JOBS=${JOBS:-$(nproc)}
DOCKER=${DOCKER:-docker}
mkdir -p "$OUT"
T0=$SECONDS

# shellcheck disable=SC2016 # expanded inside the container
[[ -f $OUT/fused_moe_90.so ]] || "$DOCKER" run --rm --network host --user 0 -e JOBS="$JOBS" -v "$OUT:/build" -v "$HERE:/tool:ro" --entrypoint bash \
    "$IMAGE" -c '
set -euo pipefail
export FLASHINFER_WORKSPACE_BASE=/build/ws FLASHINFER_CUDA_ARCH_LIST=9.0a
BUILD=$(python3 -c "
from flashinfer.jit.fused_moe import gen_cutlass_fused_moe_sm90_module as g
s = g(); s.write_ninja(); print(s.build_dir)")
GEN=$(dirname "$(dirname "$BUILD")")/generated/cutlass_instantiations/90
cd "$BUILD"
python3 /tool/fused_moe_90.py prune "$BUILD" "$GEN"
ninja -j"$JOBS" -f build.pruned.ninja > /build/ninja.log 2>&1 || { tail -40 /build/ninja.log; exit 1; }
python3 /tool/fused_moe_90.py stubs fused_moe_90.so > /build/stubs.c
cc -O2 -fPIC -shared -c /build/stubs.c -o /build/stubs.o
# relink with the stubs: the link command ninja has for the module, plus the stubs object
link=$(ninja -f build.pruned.ninja -t commands "$BUILD/fused_moe_90.so" | tail -1)
$link /build/stubs.o
cp fused_moe_90.so /build/fused_moe_90.so
python3 -c "import tvm_ffi; tvm_ffi.load_module(\"/build/fused_moe_90.so\"); print(\"fused_moe_90: loads\")" \
    || echo "fused_moe_90: does not load without a GPU driver here (checked on the host)"
ls -l /build/fused_moe_90.so
'
xz -6 -T2 -c "$OUT/fused_moe_90.so" >"$OUT/fused_moe_90.so.xz"  # here: the image has no xz
ls -l "$OUT/fused_moe_90.so.xz"
cd "$HERE/../../.."
mkdir -p .offline/moe90
cp "$OUT/fused_moe_90.so.xz" .offline/moe90/
(cd .offline/moe90 && sha256sum -- *.so.xz >SHA256SUMS.moe90) # every prebuilt module of the folder (host_install.sh)
echo "build_fused_moe_90: $((SECONDS - T0)) s; upload folder .offline/moe90"
