#!/bin/bash
# The one command for the H200: end-to-end benchmark of the served configuration (issue 14), one phase per call.
# Every engine is the real server started with the argv and environment `python -m entrypoint serve` execs
# (benchmarks/e2e/served.py): torch.compile and CUDA graphs as vLLM defaults them, measured over HTTP.
#
# usage (repo root, on the GPU host):  bash benchmarks/device/e2e.sh [PHASE]
#   PHASE  qwen (default) | qwen-start | nemotron | mixtral | control | fi-diag | all   (see docs/e2e-bench.md)
#          qwen also times the plan's start from empty, warm, copied and baked caches (start_breakdown.csv;
#          the baked Triton cache is made first by `kernels.aot bake` for the Qwen3 shape) and runs the
#          streaming-at-load check (stream_check.csv: LMI jsonlines / OpenAI SSE on /invocations / /v1/completions)
# env:     OUT       where results go (default /tmp/e2e-out): h200_e2e.csv/.md/.png, h200_e2e_raw.json,
#                    engines.log (condensed engine logs), e2e_console.log — 6 files, one folder (fi-diag adds
#                    fi_autotune_on.log.gz and autotune-off/).
#          BUDGET_S  wall-clock budget of the harness (default 540: fits one 600 s device call)
#          STEP_LIMIT_S  set by h200_session.sh: the step's hard limit; BUDGET_S is cut to fit it
#          WORK_DIR  the harness's scratch (model copies, per-engine caches and logs; default /tmp/e2e-bench-work):
#                    give each of two phases running side by side on two GPUs its own
#          VLLM_SITE where the offline vLLM 0.26 bundle is unpacked (default /root/site)
#          VLLM_PIECES  pieces dir of the offline bundle; installed first if VLLM_SITE lacks .ok
#          BAKED_CACHE  (qwen) a `python -m kernels.aot bake --shapes qwen3-30b-a3b:tp1` cache, at its baked path
# Every engine runs in its own subprocess with its own timeout; the harness writes what it has after each
# engine, so a killed or over-budget run still leaves its CSV.
# shellcheck disable=SC2054  # the commas are inside values (--backends a,b), not array separators
set -uo pipefail
PHASE=${1:-qwen}
OUT=${OUT:-/tmp/e2e-out}
BUDGET_S=${BUDGET_S:-540}
# Under h200_session.sh a step may get less than its maximum (STEP_LIMIT_S): stop and write before its `timeout`.
if [ -n "${STEP_LIMIT_S:-}" ] && ((STEP_LIMIT_S - 30 < BUDGET_S)); then BUDGET_S=$((STEP_LIMIT_S - 30)); fi
WORK=${WORK_DIR:-/tmp/e2e-bench-work}
SITE=${VLLM_SITE:-/root/site}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUT"
cd "$HERE" || exit 1

if [ ! -f "$SITE/.ok" ] && [ -n "${VLLM_PIECES:-}" ]; then
  bash "$VLLM_PIECES/host_install.sh" "$VLLM_PIECES" "$(dirname "$SITE")" || exit 1
fi
[ -d "$SITE" ] && export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

# --plan-gpu: the plan row is what `serve` would run on an H200, whether or not NVML answers in this process.
# plan vs auto (vLLM's own choice) vs triton on vLLM's default tiles (what LMI v28/v29 run: they carry vLLM PR
# #50040), 512 in / 256 out, best and median of 3.
COMMON=(--out-dir "$OUT" --work-dir "$WORK" --budget-s "$BUDGET_S" --reps 3 --output-len 256 --plan-gpu H200)
SERVED=(--backends plan,auto,triton --conc 1,8,16,32,64 --long-conc 1)
case "$PHASE" in
  qwen)      # The image's baked Triton cache for this shape (BAKED_CACHE: one made elsewhere by the same command, at
             # the path it is read from here, as the image's aot stage makes it without a GPU), else baked now.
             BAKED=${BAKED_CACHE:-$WORK/baked-triton}
             [ -d "$BAKED" ] || timeout 240 python3 -m kernels.aot bake --cache-dir "$BAKED" \
               --shapes qwen3-30b-a3b:tp1 --workers "$(nproc)" >"$OUT/aot_bake.log" 2>&1 || echo "bake failed" >&2
             ARGS=(--models qwen3-30b-a3b-fp8-static "${SERVED[@]}" --warm-restart plan --start-breakdown plan
                   --baked-cache "$BAKED" --stream-check 64:512:256:3) ;;
  qwen-start)  # the plan's start only, from empty / warm / copied / baked caches; the bake runs here, with this
             # host's Triton (a cache baked elsewhere with another Triton build misses: docs/results/e2e.md)
             BAKED=${BAKED_CACHE:-$WORK/baked-triton}
             [ -d "$BAKED" ] || timeout 240 python3 -m kernels.aot bake --cache-dir "$BAKED" \
               --shapes qwen3-30b-a3b:tp1 --workers "$(nproc)" >"$OUT/aot_bake.log" 2>&1 || echo "bake failed" >&2
             ARGS=(--models qwen3-30b-a3b-fp8-static --backends plan --conc 1 --reps 1 --long-input-len 0
                   --warm-restart plan --start-breakdown plan --baked-cache "$BAKED") ;;
  nemotron)  ARGS=(--models nemotron-3-nano-30b-a3b-fp8 "${SERVED[@]}") ;;
  mixtral)   ARGS=(--models mixtral-8x7b-fp8-static "${SERVED[@]}" --timeout mixtral-8x7b-fp8-static:auto=360) ;;
  control)   ARGS=(--models qwen3-30b-a3b-fp8-block --backends auto,triton_tuned,plan,flashinfer_cutlass
                   --conc 1,8,16,64 --long-conc 1,8 --timeout qwen3-30b-a3b-fp8-block:flashinfer_cutlass=180) ;;
  fi-diag)   # docs/e2e-findings.md Q1: autotune ON with FlashInfer's per-tactic debug log; a second engine with
             # autotune OFF only if the first one timed out (set FI_DIAG_OFF=1 to force it).
             export FLASHINFER_LOGGING_LEVEL=debug
             ARGS=(--engine offline --compile none --models mixtral-8x7b-fp8-static --backends flashinfer_cutlass
                   --conc 1 --reps 1 --output-len 16
                   --long-input-len 0 --timeout mixtral-8x7b-fp8-static:flashinfer_cutlass=330) ;;
  all)       ARGS=(--models qwen3-30b-a3b-fp8-static,nemotron-3-nano-30b-a3b-fp8,mixtral-8x7b-fp8-static,qwen3-30b-a3b-fp8-block
                   --backends auto,triton,triton_tuned,plan,flashinfer_cutlass --conc 1,8,16,32,64
                   --warm-restart triton) ;;
  *) echo "e2e.sh: unknown phase '$PHASE'; accepted: qwen qwen-start nemotron mixtral control fi-diag all" >&2; exit 2 ;;
esac

LOG="$OUT/e2e_console.log"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader 2>&1 | tee "$LOG"
python3 -m benchmarks.e2e run "${COMMON[@]}" "${ARGS[@]}" 2>&1 | tee -a "$LOG"
rc=${PIPESTATUS[0]}
if [ "$PHASE" = mixtral ]; then
  gzip -c "$WORK/mixtral-8x7b-fp8-static.auto.cold.log" >"$OUT/fi_auto.log.gz" 2>/dev/null || true
fi
if [ "$PHASE" = fi-diag ] && { [ "${FI_DIAG_OFF:-0}" = 1 ] || grep -q ',timeout,' "$OUT/h200_e2e.csv"; }; then
  # The whole autotune-ON log (per-tactic lines, the stack dump at the kill) before the next run reuses its name.
  gzip -c "$WORK/mixtral-8x7b-fp8-static.flashinfer_cutlass.cold.log" >"$OUT/fi_autotune_on.log.gz" 2>/dev/null || true
  left=$((${STEP_LIMIT_S:-100000} - SECONDS))
  if ((left >= 150)); then
    budget=$((left - 20 < 200 ? left - 20 : 200))
    mkdir -p "$OUT/autotune-off"
    unset FLASHINFER_LOGGING_LEVEL
    # Same work dir: FlashInfer's JIT workspace built by the first run is reused (no second ~100 s prebuild).
    python3 -m benchmarks.e2e run --engine offline --compile none --out-dir "$OUT/autotune-off" --work-dir "$WORK" \
      --budget-s "$budget" \
      --reps 1 --output-len 16 --models mixtral-8x7b-fp8-static --backends flashinfer_cutlass --conc 1 \
      --long-input-len 0 --engine-arg enable_flashinfer_autotune=false \
      --timeout "mixtral-8x7b-fp8-static:flashinfer_cutlass=$((budget - 10))" --plan-gpu H200 2>&1 | tee -a "$LOG"
  else
    echo "e2e.sh: fi-diag: ${left}s left, too little for the autotune-off engine" | tee -a "$LOG"
  fi
fi
echo "e2e.sh: phase $PHASE finished rc=$rc; files in $OUT: $(cd "$OUT" && echo *)"
exit "$rc"
