#!/usr/bin/env bash
# Build the image of one flavour and tag it (make image / make image-test). Run under docker/with_engine.sh.
#   usage: build_image.sh FLAVOUR TAG [DOCKER_BUILD_ARGS...]
#   cuda   the shipped image: torch, CUDA, nvcc and vLLM from the package registry's wheels (no GPU needed to build)
#   cpu    the CPU engine; its torch wheel is staged into docker/wheels/ when this machine's pip can find it (the
#          development and CI machines keep it on disk), else the build takes it from PyTorch's CPU index
#          (TORCH_CPU_INDEX_URL)
#   Both start from one local Debian 12 base (docker/cpu_base_image.sh).
#   env:   DOCKER (client), BASE_IMAGE (default moe-serving-base:bookworm, made when missing),
#          CA_BUNDLE (a CA file for pip inside the build; default: the `cert` this machine's pip is configured with)
# Builds on the host network (no bridge network exists on the development machines). Prints the build time and
# the image size; appends them to out/image-builds.csv.
set -euo pipefail

FLAVOUR=${1:?usage: build_image.sh FLAVOUR TAG [DOCKER_BUILD_ARGS...]}
TAG=${2:?usage: build_image.sh FLAVOUR TAG [DOCKER_BUILD_ARGS...]}
shift 2
DOCKER=${DOCKER:-docker}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=SCRIPTDIR/cpu_versions.sh
. "$HERE/cpu_versions.sh"

base=${BASE_IMAGE:-moe-serving-base:bookworm}
args=(--network host --build-arg "FLAVOUR=$FLAVOUR" --build-arg "BASE_IMAGE=$base" -t "$TAG")
case "$FLAVOUR" in
cuda | cpu) ;;
*)
    echo "build_image.sh: FLAVOUR=$FLAVOUR is not known; accepted: cuda, cpu" >&2
    exit 2
    ;;
esac
if [[ $base == moe-serving-base:* ]]; then
    bash "$HERE/cpu_base_image.sh" "$base"
fi
case "$FLAVOUR" in
cuda) ;;
cpu)
    # The registry has no torch +cpu build; a machine whose pip knows where one lies (find-links) copies it here.
    wheel=(--no-deps --only-binary=:all: --python-version 3.11 --implementation cp --abi cp311
        --platform manylinux_2_28_x86_64 --dest "$HERE/wheels")
    if python3 -m pip download -q "${wheel[@]}" "torch==$TORCH_CPU_VERSION" >/dev/null 2>&1; then
        echo "cpu engine: torch $TORCH_CPU_VERSION staged in docker/wheels/ (this machine's pip had it)"
        args+=(--build-arg TORCH_CPU_INDEX_URL=)
    else
        echo "cpu engine: torch $TORCH_CPU_VERSION not found by this machine's pip; the build uses PyTorch's CPU index"
    fi
    ;;
esac

ca=${CA_BUNDLE-$(python3 -m pip config get global.cert 2>/dev/null || echo "${PIP_CERT:-}")}
if [[ -n $ca ]]; then
    [[ -s $ca ]] || { echo "build_image.sh: CA_BUNDLE=$ca is not a readable file" >&2; exit 2; }
    args+=(--secret "id=ca,src=$ca")
    echo "pip inside the build trusts $ca (a build secret: in no layer)"
fi

start=$SECONDS
DOCKER_BUILDKIT=1 "$DOCKER" build "${args[@]}" "$@" "$ROOT"
seconds=$((SECONDS - start))
bytes=$("$DOCKER" image inspect -f '{{.Size}}' "$TAG")
echo "image $TAG ($FLAVOUR): built in ${seconds} s, $((bytes / 1000000)) MB"
mkdir -p "$ROOT/out"
csv="$ROOT/out/image-builds.csv"
[[ -s $csv ]] || echo "date,flavour,tag,build_s,size_mb,extra_args" >"$csv"
echo "$(date -u +%FT%TZ),$FLAVOUR,$TAG,$seconds,$((bytes / 1000000)),$*" >>"$csv"
