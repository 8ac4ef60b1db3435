#!/usr/bin/env bash
# aot stage: compile the Triton MoE kernels the tuned configs will need into a Triton cache that
# the final image points TRITON_CACHE_DIR at, so the first engine start does not JIT-compile.
#   usage: aot_cache.sh CACHE_DIR      (AOT_MODE=compile|skip, default compile)
set -euo pipefail

CACHE=${1:?usage: aot_cache.sh CACHE_DIR}
PY=${PYTHON:-python3}
MODE=${AOT_MODE:-compile}

mkdir -p "$CACHE"
case "$MODE" in
compile)
    "$PY" -m kernels.aot --out "$CACHE"
    n=$(find "$CACHE" -type f | wc -l)
    if ((n == 0)); then
        echo "aot_cache.sh: kernels.aot wrote nothing to $CACHE" >&2
        exit 1
    fi
    echo "triton cache: $n file(s) in $CACHE"
    ;;
skip)
    echo "triton cache: skipped (AOT_MODE=skip); kernels compile on first use"
    ;;
*)
    echo "aot_cache.sh: AOT_MODE=$MODE is not known; accepted: compile, skip" >&2
    exit 2
    ;;
esac
# Triton writes new kernels next to the baked ones: keep the cache writable for any user
# (`docker run --user ...`); the sticky bit keeps users from deleting each other's files.
chmod -R a+rwX "$CACHE"
chmod +t "$CACHE"
