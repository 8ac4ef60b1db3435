#!/usr/bin/env bash
# final stage: compile FlashInfer's JIT modules that every engine start needs (its top-k/top-p sampler) into
# the FlashInfer workspace the image runs with, so a fresh container does not spend ~80-130 s in nvcc on its
# first engine start (docs/results/start-time.md). docker/flashinfer_jit_cache.py says why the result stays valid
# (same paths, flags and arch directory at run time) and checks it in a fresh process.
#   usage: flashinfer_jit_cache.sh WORKSPACE
#   env:   FLASHINFER_JIT_CACHE=compile|skip (default compile), FLASHINFER_JIT_ARCHS (default "9.0a": H100/H200;
#          space-separated, one build each; GPUs not listed look in another arch folder and JIT-compile as before),
#          FLASHINFER_JIT_MODULES (default sampling), FLAVOUR (cpu: always skipped, the CPU engine has no FlashInfer)
set -euo pipefail

WORKSPACE=${1:?usage: flashinfer_jit_cache.sh WORKSPACE}
PY=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)

mkdir -p "$WORKSPACE"
MODE=${FLASHINFER_JIT_CACHE:-compile}
if [[ ${FLAVOUR:-cuda} == cpu ]]; then
    echo "flashinfer jit cache: skipped for the cpu flavour (the CPU engine has no FlashInfer)"
    MODE=flavour-cpu
fi
case "$MODE" in
compile)
    "$PY" "$HERE/flashinfer_jit_cache.py" --workspace "$WORKSPACE" \
        --archs "${FLASHINFER_JIT_ARCHS:-9.0a}" --modules "${FLASHINFER_JIT_MODULES:-sampling}"
    # The object files stay: ninja compares their times with the module's, and a missing one means a relink.
    # FlashInfer's JIT logger opens <workspace>/<version>/[<arch>/]flashinfer_jit.log for appending at every import
    # (flashinfer/jit/core.py, FlashInferJITLogger): a link to /tmp keeps a running container's writes under /tmp.
    for dir in "$WORKSPACE"/.cache/flashinfer/*/ "$WORKSPACE"/.cache/flashinfer/*/*/; do
        [[ $(basename "$dir") == cached_ops || $(basename "$dir") == generated ]] && continue
        ln -sfn /tmp/flashinfer_jit.log "${dir}flashinfer_jit.log"
    done
    ;;
skip)
    echo "flashinfer jit cache: skipped (FLASHINFER_JIT_CACHE=skip): FlashInfer compiles on the first engine start"
    ;;
flavour-cpu) ;; # said above
*)
    echo "flashinfer_jit_cache.sh: FLASHINFER_JIT_CACHE='${FLASHINFER_JIT_CACHE}'; accepted: compile, skip" >&2
    exit 2
    ;;
esac
# Any user may run the image (README.md, "Root or not"): FlashInfer takes file locks and builds other modules here.
chmod -R a+rwX "$WORKSPACE"
