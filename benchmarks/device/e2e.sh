#!/bin/bash
# The one command for the H200: end-to-end vLLM engine benchmark (issue 6), one phase per call.
#
# usage (repo root, on the GPU host):  bash benchmarks/device/e2e.sh [PHASE]
#   PHASE  qwen (default) | nemotron | mixtral | control | fi-diag | all      (see docs/e2e-bench.md)
# env:     OUT       where results go (default /tmp/e2e-out): h200_e2e.csv/.md/.png, h200_e2e_raw.json,
#                    engines.log (condensed engine logs), e2e_console.log — 6 files, one folder (fi-diag adds
#                    fi_autotune_on.log.gz and autotune-off/).
#          BUDGET_S  wall-clock budget of the harness (default 540: fits one 600 s device call)
#          STEP_LIMIT_S  set by h200_session.sh: the step's hard limit; BUDGET_S is cut to fit it
#          WORK_DIR  the harness's scratch (model copies, per-engine caches and logs; default /tmp/e2e-bench-work):
#                    give each of two phases running side by side on two GPUs its own
#          VLLM_SITE where the offline vLLM 0.26 bundle is unpacked (default /root/site)
#          VLLM_PIECES  pieces dir of the offline bundle; installed first if VLLM_SITE lacks .ok
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
COMMON=(--out-dir "$OUT" --work-dir "$WORK" --budget-s "$BUDGET_S" --reps 3 --output-len 128 --plan-gpu H200)
case "$PHASE" in
  qwen)      ARGS=(--models qwen3-30b-a3b-fp8-static --backends auto,triton,triton_tuned,plan,flashinfer_cutlass
                   --conc 1,8,16,32,64 --long-conc 1) ;;
  nemotron)  ARGS=(--models nemotron-3-nano-30b-a3b-fp8 --backends auto,triton,triton_tuned,plan,flashinfer_cutlass
                   --conc 1,8,16,64 --long-conc 1) ;;
  mixtral)   # auto (= FlashInfer CUTLASS) last, with FlashInfer's per-tactic debug log (docs/e2e-findings.md Q1):
             # a start that hangs again leaves its log in fi_auto.log.gz. The log is quiet once tuned.
             export FLASHINFER_LOGGING_LEVEL=debug
             ARGS=(--models mixtral-8x7b-fp8-static --backends triton,triton_tuned,plan,auto
                   --conc 1,8,16,64 --long-conc 1 --timeout mixtral-8x7b-fp8-static:auto=360) ;;
  control)   ARGS=(--models qwen3-30b-a3b-fp8-block --backends auto,triton_tuned,plan,flashinfer_cutlass
                   --conc 1,8,16,64 --long-conc 1,8 --timeout qwen3-30b-a3b-fp8-block:flashinfer_cutlass=180) ;;
  fi-diag)   # docs/e2e-findings.md Q1: autotune ON with FlashInfer's per-tactic debug log; a second engine with
             # autotune OFF only if the first one timed out (set FI_DIAG_OFF=1 to force it).
             export FLASHINFER_LOGGING_LEVEL=debug
             ARGS=(--models mixtral-8x7b-fp8-static --backends flashinfer_cutlass --conc 1 --reps 1 --output-len 16
                   --long-input-len 0 --timeout mixtral-8x7b-fp8-static:flashinfer_cutlass=330) ;;
  all)       ARGS=(--models qwen3-30b-a3b-fp8-static,nemotron-3-nano-30b-a3b-fp8,mixtral-8x7b-fp8-static,qwen3-30b-a3b-fp8-block
                   --backends auto,triton,triton_tuned,plan,flashinfer_cutlass --conc 1,8,16,32,64
                   --warm-restart triton) ;;
  *) echo "e2e.sh: unknown phase '$PHASE'; accepted: qwen nemotron mixtral control fi-diag all" >&2; exit 2 ;;
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
    python3 -m benchmarks.e2e run --out-dir "$OUT/autotune-off" --work-dir "$WORK" --budget-s "$budget" \
      --reps 1 --output-len 16 --models mixtral-8x7b-fp8-static --backends flashinfer_cutlass --conc 1 \
      --long-input-len 0 --engine-arg enable_flashinfer_autotune=false \
      --timeout "mixtral-8x7b-fp8-static:flashinfer_cutlass=$((budget - 10))" --plan-gpu H200 2>&1 | tee -a "$LOG"
  else
    echo "e2e.sh: fi-diag: ${left}s left, too little for the autotune-off engine" | tee -a "$LOG"
  fi
fi
echo "e2e.sh: phase $PHASE finished rc=$rc; files in $OUT: $(cd "$OUT" && echo *)"
exit "$rc"
