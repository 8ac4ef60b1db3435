#!/usr/bin/env bash
# make cache-layer: bake the compile caches of IMAGE's served plan for MODEL_DIR on this host, then build CACHE_IMAGE
# = IMAGE + that layer (docker/cache-layer.Dockerfile). Run it on the GPU host the image will serve on (same GPU
# kind, same serving.properties / OPTION_* as the endpoint: the layer is keyed by the plan, and a start with another
# plan logs why it does not use it). A CPU-only bake cannot make torch.compile's CUDA artifacts: see
# entrypoint/caches/compile_layer.py.
#   bash docker/cache_layer.sh IMAGE MODEL_DIR OUT_DIR CACHE_IMAGE
# env: DOCKER (docker), CACHE_LAYER_RUN_ARGS (extra `docker run` arguments, e.g. "--gpus all --shm-size 16g",
#      or "-e OPTION_MAX_MODEL_LEN=8192" to bake the endpoint's options), CACHE_LAYER_BAKE_ARGS (extra `bake-cache`
#      arguments, e.g. "--tune-budget-s 300"; the Makefile passes --tune and --tune-budget-s)
set -euo pipefail
IMAGE=$1 MODEL_DIR=$2 OUT=$3 CACHE_IMAGE=$4
DOCKER=${DOCKER:-docker}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
read -ra RUN_ARGS <<<"${CACHE_LAYER_RUN_ARGS:-}"
read -ra BAKE_ARGS <<<"${CACHE_LAYER_BAKE_ARGS:-}"

# a finished layer has its manifest; an unfinished one (a killed tune or bake) is resumed: bake-cache keeps the tune's
# measurements (tune-state.jsonl) and clears the partial compile caches
if [ -e "$OUT/layer/manifest.json" ]; then
  echo "cache_layer: $OUT/layer exists; remove it or give another OUT_DIR" >&2
  exit 2
fi
mkdir -p "$OUT"
# the model read-only where SageMaker mounts it, so the plan (and its key) is the endpoint's
"$DOCKER" run --rm --network host "${RUN_ARGS[@]}" -v "$(cd "$MODEL_DIR" && pwd):/opt/ml/model:ro" \
  -v "$(cd "$OUT" && pwd):/out" "$IMAGE" bake-cache --out /out/layer "${BAKE_ARGS[@]}"
DOCKER_BUILDKIT=1 "$DOCKER" build -f "$ROOT/docker/cache-layer.Dockerfile" --build-arg "BASE_IMAGE=$IMAGE" \
  -t "$CACHE_IMAGE" "$OUT/layer"
echo "cache_layer: $CACHE_IMAGE = $IMAGE + $OUT/layer ($(du -sh "$OUT/layer" | cut -f1))"
