#!/usr/bin/env bash
# make image-test: build the image of FLAVOUR, then run the container tests (tests/image, marker `image`) against
# it: the container started as SageMaker starts it, on the host network, the tiny model read-only at
# /opt/ml/model. Run under docker/with_engine.sh (it provides DOCKER and a running engine).
#   usage: image_test.sh FLAVOUR IMAGE
#   cuda: the same tests with `--gpus all` (an H200 build host; not run on the development or CI machines)
set -euo pipefail

FLAVOUR=${1:?usage: image_test.sh FLAVOUR IMAGE}
IMAGE=${2:?usage: image_test.sh FLAVOUR IMAGE}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}

case "$FLAVOUR" in
cpu) run_args="" ;;
cuda) run_args="--gpus all --shm-size 16g" ;;
*)
    echo "image_test.sh: FLAVOUR=$FLAVOUR is not known; accepted: cuda, cpu" >&2
    exit 2
    ;;
esac

bash "$HERE/build_image.sh" "$FLAVOUR" "$IMAGE"
cd "$ROOT"
MOE_IMAGE=$IMAGE MOE_IMAGE_RUN_ARGS=$run_args "$PY" -m pytest -p no:cacheprovider -m image -v -s tests/image
