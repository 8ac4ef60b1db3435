#!/usr/bin/env bash
# Our kernels on one H200 (our FP8 fused MoE + fused RoPE/FP8): correctness, then benchmarks.
# Run from the repository root with the image's torch and Triton; vLLM optional (the offline bundle at
# VLLM_SITE, default /root/site; without it the MoE bench compares ours vs CUTLASS vs the HBM floor).
#
#   bash benchmarks/device/kernels_check_and_bench.sh            (≤ 15 min; every stage has its own timeout)
#
# Stages, each guarded (a failure is logged and the next stage still runs):
#   1 preflight   GPU, versions, vLLM importable?
#   2 gpu-tests   python3 -m pytest -m gpu tests/ops  (real model shapes, both routing modes; real JIT
#                 compile count of the RoPE kernel)                                    ≤ 150 s
#   3 rope-bench  benchmarks.kernels.bench_rope_fp8 → h200_rope_fp8.csv                       ≤ 45 s
#   4 moe-bench   benchmarks.kernels.bench_fused_moe → h200_fused_moe.{csv,md,png}            ≤ 300 s
#                 (CSV/MD rewritten after every shape, so a timeout keeps the finished shapes)
#   4b dispatch   benchmarks.kernels.dispatch_table from this run's CSV → $OUT/fused_moe_dispatch.json (commit it
#                 as kernels/fused_moe_dispatch.json with the CSV)                                  ≤ 60 s
#   4c plugin     (vLLM importable) pytest -m gpu tests/entrypoint/moe_plugin: the engine plugin's patched
#                 TritonExperts against vLLM's on four shapes, with the table just made               ≤ 150 s
#   5 sweep       benchmarks.kernels.fused_moe_fp8_sweep: every candidate_configs entry at M = 1, 2, 4, 8 on the
#                 three issue-7 goal shapes → fused_moe_fp8_sweep.{csv,md}, fused_moe_fp8_best.json  ≤ 150 s
# Results land in $OUT: the CSVs/PNG/MD/JSON, and every log (run, gpu_tests + junit xml, rope, moe, sweep) in
# $OUT/logs (or, with LOGS set elsewhere, packed into $OUT/logs.tar.gz: one file to copy off the host).
# A short table is printed last.
set -uo pipefail

OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export PYTHONPATH="$PWD:${VLLM_SITE:-/root/site}${PYTHONPATH:+:$PYTHONPATH}"
export VLLM_LOGGING_LEVEL=${VLLM_LOGGING_LEVEL:-WARNING}
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/root/triton-ours-cache}
PY=${PY:-python3}
# Logs inside $OUT/logs by default: a run cut by its caller's timeout still leaves them (run_queue.sh packs
# the whole step folder). Pass LOGS=$(mktemp -d) to get them as one logs.tar.gz in $OUT instead.
LOGS=${LOGS:-$OUT/logs}
mkdir -p "$LOGS"
LOG="$LOGS/run.log"
STATUS=()

log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$LOG"; }

stage() {  # stage NAME TIMEOUT_S LOGFILE CMD...
  local name=$1 limit=$2 logf=$3; shift 3
  local t0=$SECONDS
  log "stage $name: $* (timeout ${limit}s)"
  timeout --kill-after=10 "$limit" "$@" >"$logf" 2>&1
  local rc=$?
  local dt=$((SECONDS - t0))
  tail -n 5 "$logf" | sed 's/^/    /' | tee -a "$LOG"
  log "stage $name: rc=$rc in ${dt}s"
  STATUS+=("$name rc=$rc ${dt}s")
  return 0
}

log "preflight"
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 | tee -a "$LOG"
$PY - <<'PY' 2>&1 | tail -n 4 | tee -a "$LOG"
import torch, triton
print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.cuda.is_available())
try:
    import vllm
    print("vllm", vllm.__version__)
except Exception as exc:
    print("vllm not importable:", type(exc).__name__, exc)
PY

# SKIP_TESTS=1: `make test-gpu` (scripts/test_gpu.sh) ran already; only the benches run here
[ "${SKIP_TESTS:-0}" = 1 ] || stage gpu-tests 150 "$LOGS/gpu_tests.log" \
  "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/ops --junitxml="$LOGS/gpu_tests.xml" --maxfail=10
stage rope-bench 45 "$LOGS/rope.log" "$PY" -m benchmarks.kernels.bench_rope_fp8 --out "$OUT"
stage moe-bench 300 "$LOGS/moe.log" "$PY" -m benchmarks.kernels.bench_fused_moe --out "$OUT" --sweep-max-m 1
if [ -f "$OUT/h200_fused_moe.csv" ] && grep -q "NVIDIA" "$OUT/h200_fused_moe.csv"; then
  stage dispatch 60 "$LOGS/dispatch.log" "$PY" -m benchmarks.kernels.dispatch_table --csv "$OUT/h200_fused_moe.csv" \
    --out "$OUT/fused_moe_dispatch.json"
fi
if [ "${SKIP_TESTS:-0}" != 1 ] && "$PY" -c "import vllm" >/dev/null 2>&1; then
  table=kernels/fused_moe_dispatch.json
  [ -f "$OUT/fused_moe_dispatch.json" ] && table=$OUT/fused_moe_dispatch.json
  MOE_SERVING_DISPATCH_TABLE=$table stage plugin 150 "$LOGS/plugin_gpu_tests.log" \
    "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/entrypoint/moe_plugin --junitxml="$LOGS/plugin_gpu_tests.xml"
fi
stage sweep 150 "$LOGS/sweep.log" "$PY" -m benchmarks.kernels.fused_moe_fp8_sweep \
  --shapes qwen3-30b-a3b:tp1,deepseek-v3:tp8,llama-4-maverick:tp8 --ms 1,2,4,8 --out "$OUT" --budget-s 130
[ "$LOGS" = "$OUT/logs" ] || tar -czf "$OUT/logs.tar.gz" -C "$LOGS" .

echo
echo "==== summary ===="
printf '%s\n' "${STATUS[@]}"
[ -f "$LOGS/gpu_tests.log" ] && grep -E "passed|failed|error" "$LOGS/gpu_tests.log" | tail -n 2
grep -E "^rope " "$LOGS/rope.log" | awk 'NR % 7 == 1 || NR % 7 == 0' | head -n 6
if [ -f "$OUT/h200_fused_moe.md" ]; then
  grep -E "\| (1|2|4|16|64|256) \|" "$OUT/h200_fused_moe.md" | cut -c1-110
else
  grep -E "M= *[0-9]+ ours" "$LOGS/moe.log" | tail -n 20
fi
