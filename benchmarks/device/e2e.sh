#!/bin/bash
# The one command for the H200: end-to-end vLLM engine benchmark (issue 6), one phase per call.
#
# usage (repo root, on the GPU host):  bash benchmarks/device/e2e.sh [PHASE]
#   PHASE  qwen (default) | nemotron | mixtral | control | fi-diag | all      (see docs/e2e-bench.md)
# env:     OUT       where results go (default /tmp/e2e-out): h200_e2e.csv/.md/.png, h200_e2e_raw.json,
#                    engines.log (condensed engine logs), console.log — 6 files, one folder.
#          BUDGET_S  wall-clock budget of the harness (default 540: fits one 600 s device call)
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
SITE=${VLLM_SITE:-/root/site}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUT"
cd "$HERE" || exit 1

if [ ! -f "$SITE/.ok" ] && [ -n "${VLLM_PIECES:-}" ]; then
  bash "$VLLM_PIECES/host_install.sh" "$VLLM_PIECES" "$(dirname "$SITE")" || exit 1
fi
[ -d "$SITE" ] && export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

COMMON=(--out-dir "$OUT" --work-dir "${WORK_DIR:-/tmp/e2e-bench-work}" --budget-s "$BUDGET_S" --reps 3 --output-len 128)
case "$PHASE" in
  qwen)      ARGS=(--models qwen3-30b-a3b-fp8-static --backends auto,triton,triton_tuned,plan,flashinfer_cutlass
                   --conc 1,8,16,32,64 --long-conc 1) ;;
  nemotron)  ARGS=(--models nemotron-3-nano-30b-a3b-fp8 --backends auto,triton,triton_tuned,plan,flashinfer_cutlass
                   --conc 1,8,16,64 --long-conc 1) ;;
  mixtral)   ARGS=(--models mixtral-8x7b-fp8-static --backends triton,triton_tuned,plan,auto
                   --conc 1,8,16,64 --long-conc 1 --timeout mixtral-8x7b-fp8-static:auto=240) ;;
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

nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader 2>&1 | tee "$OUT/console.log"
python3 -m benchmarks.e2e run "${COMMON[@]}" "${ARGS[@]}" 2>&1 | tee -a "$OUT/console.log"
rc=${PIPESTATUS[0]}
if [ "$PHASE" = fi-diag ] && { [ "${FI_DIAG_OFF:-0}" = 1 ] || grep -q ',timeout,' "$OUT/h200_e2e.csv"; }; then
  mkdir -p "$OUT/autotune-off"
  unset FLASHINFER_LOGGING_LEVEL
  python3 -m benchmarks.e2e run --out-dir "$OUT/autotune-off" --budget-s 200 --reps 1 --output-len 16 \
    --models mixtral-8x7b-fp8-static --backends flashinfer_cutlass --conc 1 --long-input-len 0 \
    --engine-arg enable_flashinfer_autotune=false --timeout mixtral-8x7b-fp8-static:flashinfer_cutlass=190 \
    2>&1 | tee -a "$OUT/console.log"
fi
echo "e2e.sh: phase $PHASE finished rc=$rc; files in $OUT: $(cd "$OUT" && echo *)"
exit "$rc"
