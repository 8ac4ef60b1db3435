#!/usr/bin/env bash
# aot stage: compile the Triton MoE kernels the tuned configs need for sm_90 into a Triton cache,
# without a GPU (kernels/aot.py drives Triton's own JIT against an sm_90 target), and our own fused-MoE kernel at
# every M of the dispatch table (ops/fused_moe_fp8_aot.py: the engine plugin's launches), so the first engine
# start does not JIT-compile them.
#   usage: aot_cache.sh CACHE_DIR CONFIG_DIR
#   env:   AOT_MODE=compile|skip (default compile), AOT_ARGS (extra `kernels.aot bake` arguments,
#          e.g. "--shapes qwen3-30b-a3b:tp1 --batch-sizes 1,2,4"), AOT_OURS_ARGS (extra `ops.fused_moe_fp8_aot
#          --bake` arguments, e.g. "--shapes qwen3-30b-a3b:tp1"), FLAVOUR (cpu: always skipped, there is no GPU
#          kernel to run)
# Triton's cache index stores absolute paths: CACHE_DIR must be the path the image runs with
# (the Dockerfile copies it to the same path in the final stage).
set -euo pipefail

CACHE=${1:?usage: aot_cache.sh CACHE_DIR CONFIG_DIR}
CONFIGS=${2:?usage: aot_cache.sh CACHE_DIR CONFIG_DIR}
PY=${PYTHON:-python3}
MODE=${AOT_MODE:-compile}
if [[ ${FLAVOUR:-cuda} == cpu ]]; then
    echo "triton cache: skipped for the cpu flavour (the CPU engine runs no Triton kernel)"
    MODE=flavour-cpu
fi
read -r -a extra <<<"${AOT_ARGS:-}"
read -r -a ours <<<"${AOT_OURS_ARGS:-}"

mkdir -p "$CACHE"
# Under Triton's interpreter nothing is compiled, so a bake would silently produce an empty cache
# (seen in `make test`: tests/ops/conftest.py sets TRITON_INTERPRET=1 for the whole session).
unset TRITON_INTERPRET
case "$MODE" in
compile)
    shopt -s nullglob
    configs=("$CONFIGS"/*.json)
    if ((${#configs[@]} == 0)); then
        # Nothing tuned, nothing to bake: vLLM runs its own tiles and Triton compiles them on
        # first use, exactly as without this project.
        echo "triton cache: no tuned configs in $CONFIGS, nothing to compile"
    else
        "$PY" -m kernels.aot bake --cache-dir "$CACHE" --config-dir "$CONFIGS" "${extra[@]}"
        n=$(find "$CACHE" -name 'fused_moe_kernel.json' | wc -l)
        if ((n == 0)); then
            echo "aot_cache.sh: kernels.aot compiled nothing into $CACHE from ${#configs[@]} config(s)" >&2
            exit 1
        fi
        echo "triton cache: $n fused_moe_kernel variant(s) in $CACHE"
    fi
    # Independent of the tuned configs: the plugin runs wherever kernels/fused_moe_dispatch.json has a row.
    "$PY" -m ops.fused_moe_fp8_aot --bake "$CACHE" "${ours[@]}"
    n=$(find "$CACHE" -name 'moe_gemm1_kernel.json' | wc -l)
    if ((n == 0)); then
        echo "aot_cache.sh: ops.fused_moe_fp8_aot compiled nothing of our kernel into $CACHE" >&2
        exit 1
    fi
    echo "triton cache: $n moe_gemm1_kernel variant(s) of our fused-MoE kernel in $CACHE"
    ;;
skip)
    echo "triton cache: skipped (AOT_MODE=skip); kernels compile on first use"
    ;;
flavour-cpu) ;; # said above
*)
    echo "aot_cache.sh: AOT_MODE=$MODE is not known; accepted: compile, skip" >&2
    exit 2
    ;;
esac
# Read-only at run time, for any user (`docker run --user ...`): the image points TRITON_CACHE_DIR at /tmp and
# kernels.triton_cache:BakedFirstCacheManager reads this baked cache first, so new compiles land under /tmp.
chmod -R a+rX,go-w "$CACHE"
