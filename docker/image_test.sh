#!/usr/bin/env bash
# make image-test: build the image of FLAVOUR, then run the container tests (tests/image, marker `image`) against
# it, on the host network. Run under docker/with_engine.sh (it provides DOCKER and a running engine).
#   usage: image_test.sh FLAVOUR IMAGE
#   cpu:  tests/image except cuda/: the container started as SageMaker starts it, serving the tiny model read-only
#         at /opt/ml/model on the CPU engine
#   cuda: tests/image/cuda and the lock check: everything that holds without a GPU (versions, shared libraries, the
#         plan, the plugin, the baked caches, writes as any uid, `serve` refused without --gpus); CI runs it on a
#         machine with no GPU. Serving on a GPU is `make test-gpu` on an H200 host.
set -euo pipefail

FLAVOUR=${1:?usage: image_test.sh FLAVOUR IMAGE}
IMAGE=${2:?usage: image_test.sh FLAVOUR IMAGE}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}

case "$FLAVOUR" in
cpu) tests=(tests/image --ignore=tests/image/cuda --ignore=tests/image/test_cuda_pins.py) ;;
cuda) tests=(tests/image/cuda tests/image/test_cuda_pins.py) ;;
*)
    echo "image_test.sh: FLAVOUR=$FLAVOUR is not known; accepted: cuda, cpu" >&2
    exit 2
    ;;
esac

bash "$HERE/build_image.sh" "$FLAVOUR" "$IMAGE"
cd "$ROOT"
MOE_IMAGE=$IMAGE "$PY" -m pytest -p no:cacheprovider -m image -v -s "${tests[@]}"
