#!/usr/bin/env bash
# FlashInfer's `sampling` and `trtllm_utils` modules for the device host, as prebuilt modules: every harness run's
# preparation built them with nvcc on a fresh host, 108 s of a 30-minute session (2026-12-07e: sampling 93 s,
# trtllm_utils 14 s). `sampling` is taken from the cuda image, which compiles it at build time
# (docker/flashinfer_jit_cache.sh); `trtllm_utils` (FlashInfer's autotuner delay kernel) is compiled in the image by
# the same tool. Both go to the upload folder .offline/moe90 beside fused_moe_90 (build_fused_moe_90.sh), and
# host_install.sh installs every module of that folder where FlashInfer loads a prebuilt one
# (flashinfer/data/aot/NAME/NAME.so, flashinfer/jit/env.py get_aot_path), so neither is built on the host.
#   usage: build_flashinfer_prebuilt.sh [OUT]     (default ~/.cache/h200-bundle/moe90; modules already there are kept)
#   env:   IMAGE (default moe-serving:latest), DOCKER (default docker)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-$HOME/.cache/h200-bundle/moe90}
IMAGE=${IMAGE:-moe-serving:latest}
DOCKER=${DOCKER:-docker}
mkdir -p "$OUT"
T0=$SECONDS

if [[ ! -f $OUT/sampling.so || ! -f $OUT/trtllm_utils.so ]]; then
  # shellcheck disable=SC2016 # expanded inside the container
  "$DOCKER" run --rm --network host --user 0 -v "$OUT:/build" --entrypoint bash "$IMAGE" -c '
set -euo pipefail
base=${FLASHINFER_WORKSPACE_BASE:-/opt/moe-serving/flashinfer}
so=$(find "$base" -path "*/90a/cached_ops/sampling/sampling.so" | head -1)
[[ -n $so ]] || { echo "no sampling.so for 90a under $base: was the image built with FLASHINFER_JIT_CACHE=skip?" >&2; exit 1; }
cp "$so" /build/sampling.so
python3 /opt/moe-serving/docker/flashinfer_jit_cache.py --workspace /build/ws --archs 9.0a --modules trtllm_utils
cp "$(find /build/ws -path "*/90a/cached_ops/trtllm_utils/trtllm_utils.so" | head -1)" /build/trtllm_utils.so
rm -rf /build/ws
ls -l /build/sampling.so /build/trtllm_utils.so
'
fi
cd "$HERE/../../.."
mkdir -p .offline/moe90
for name in sampling trtllm_utils; do
  xz -6 -T2 -c "$OUT/$name.so" >".offline/moe90/$name.so.xz" # here: the image has no xz
done
# one sums file for every prebuilt module of the folder: host_install.sh installs what it names
(cd .offline/moe90 && sha256sum -- *.so.xz >SHA256SUMS.moe90)
ls -l .offline/moe90
echo "build_flashinfer_prebuilt: $((SECONDS - T0)) s; upload folder .offline/moe90"
