#!/usr/bin/env bash
# Tune vLLM's Triton fused-MoE tiles on an H200, benchmark them, and prove the ahead-of-time Triton cache.
# Run from the repository root with the image's vLLM importable (inside the image, or the offline bundle at
# VLLM_SITE, default /root/site: benchmarks/README.md).
#
#   benchmarks/device/tune_and_bench.sh PHASE [PHASE...]     PHASE ∈ tune | bench | aotcheck
#
#   tune      tools.tune for the shipped shapes in priority order within TUNE_BUDGET_S (default 420 s;
#             whole phase ≈ budget + 60 s); tuned files → $OUT/configs.tar.gz (unpack into kernels/).
#   bench     numerics of every tuned file (tuned tile vs vLLM default tile vs fp32 reference), then
#             benchmarks.kernels.bench_moe_configs (≈ 2–3 min for all shapes) → CSV, PNG, markdown.
#   aotcheck  bake the Triton cache with the GPU hidden (CUDA_VISIBLE_DEVICES=""), then run vLLM's kernel
#             for every baked case and count JIT compilations: must be 0 with the baked cache (and > 0
#             against an empty cache — the control that the counter can fire). ≈ 3 min.
# Everything lands in $OUT (8 files): run.log, tune_state.jsonl, configs.tar.gz, h200_moe_configs.{csv,png,md},
# aot_check.json. A short table is printed last.
set -euo pipefail

OUT=${OUT:-$PWD/out}
mkdir -p "$OUT" kernels/configs
export PYTHONPATH="$PWD:${VLLM_SITE:-/root/site}${PYTHONPATH:+:$PYTHONPATH}"
export VLLM_LOGGING_LEVEL=${VLLM_LOGGING_LEVEL:-WARNING}
export TQDM_MININTERVAL=5
PY=${PY:-python3}
LOG="$OUT/run.log"
WORKERS=${WORKERS:-$(( $(nproc) - 1 ))}
# One cache for tuning/bench (baked cache for aotcheck is separate and at a fixed absolute path,
# because Triton's cache index stores absolute paths).
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/root/triton-tune-cache}
BAKED=${BAKED_CACHE_DIR:-/opt/moe-serving/triton-cache}
# Priority order of issue 4 (device time is scarce); the budget decides how far the list gets.
SHAPES=${SHAPES:-qwen3-30b-a3b:tp1,mixtral-8x7b:tp1,nemotron-3-nano-30b-a3b:tp1,deepseek-v3:tp8,qwen3-30b-a3b:tp2,qwen3-235b-a22b:tp4,qwen3-235b-a22b:tp8,mixtral-8x7b:tp2,mixtral-8x22b:tp4,mixtral-8x22b:tp8,llama-4-scout:tp4,llama-4-scout:tp8,llama-4-maverick:tp4,llama-4-maverick:tp8}
SUMMARY=()

log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$LOG"; }

preflight() {
  nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total,clocks.sm,clocks.mem --format=csv | tee -a "$LOG"
  $PY - <<'PY' 2>&1 | tail -n 3 | tee -a "$LOG"
import torch, triton, vllm
print(f"torch {torch.__version__} triton {triton.__version__} vllm {vllm.__version__} gpu {torch.cuda.get_device_name()}")
PY
}

phase_tune() {
  log "tune: shapes=$SHAPES budget=${TUNE_BUDGET_S:-420}s workers=$WORKERS"
  local t0=$SECONDS rc=0
  $PY -m tools.tune --shapes "$SHAPES" --budget-s "${TUNE_BUDGET_S:-420}" --workers "$WORKERS" \
      --state "$OUT/tune_state.jsonl" --out-dir kernels/configs >>"$LOG" 2>&1 || rc=$?
  grep -E "µs  incumbent|^\{" "$LOG" | tail -n 40 || true
  $PY -m tools.tune --write-readme --out-dir kernels/configs >>"$LOG" 2>&1 || rc=$?
  tar -czf "$OUT/configs.tar.gz" kernels/configs
  local files
  files=$(find kernels/configs -name 'E=*.json' | wc -l)
  SUMMARY+=("tune      rc=$rc $((SECONDS - t0)) s, $files tuned files in configs.tar.gz, $(grep -c '"final"' "$OUT/tune_state.jsonl" || true) (shape,M) finals")
}

phase_bench() {
  log "bench: numerics then timings"
  local t0=$SECONDS rc=0 rc2=0
  $PY -m benchmarks.kernels.bench_moe_configs --check-only --shapes "$SHAPES" >>"$LOG" 2>&1 || rc=$?
  grep -E "^(check|NUMERICS)" "$LOG" || true
  $PY -m benchmarks.kernels.bench_moe_configs --shapes "$SHAPES" --out-dir "$OUT" >>"$LOG" 2>&1 || rc2=$?
  local rows=0
  [ -f "$OUT/h200_moe_configs.csv" ] && rows=$(($(wc -l < "$OUT/h200_moe_configs.csv") - 1))
  SUMMARY+=("bench     $((SECONDS - t0)) s, numerics rc=$rc (want 0), bench rc=$rc2, $rows rows")
}

phase_aotcheck() {
  log "aotcheck: bake into $BAKED with no GPU visible"
  local t0=$SECONDS
  rm -rf "$BAKED" /root/triton-empty-cache
  local brc=0
  CUDA_VISIBLE_DEVICES="" $PY -m kernels.aot bake --cache-dir "$BAKED" --shapes "$SHAPES" --workers "$WORKERS" \
      >>"$LOG" 2>&1 || brc=$?
  grep '^{"cases"' "$LOG" | tail -n 1 || true
  local bake_s=$((SECONDS - t0))
  log "aotcheck: control run against an EMPTY cache (must report JIT compiles, exit 1)"
  local ctrl=0
  $PY -m tools.aot_check --cache-dir /root/triton-empty-cache --shapes "${SHAPES%%,*}" --batch-sizes 1,64 \
      > "$OUT/aot_control.json" 2>>"$LOG" || ctrl=$?
  cat "$OUT/aot_control.json" >> "$LOG"
  log "aotcheck: run every baked case against the BAKED cache (must be 0 JIT compiles)"
  local rc=0
  $PY -m tools.aot_check --cache-dir "$BAKED" --shapes "$SHAPES" --json-out "$OUT/aot_check.json" >>"$LOG" 2>&1 || rc=$?
  rm -f "$OUT/aot_control.json"
  local jit="no result"
  [ -f "$OUT/aot_check.json" ] && jit=$(tr -d '\n ' < "$OUT/aot_check.json" | grep -o '"fused_moe_kernel_jit_compiles":[0-9]*' || true)
  SUMMARY+=("aotcheck  bake rc=$brc ${bake_s} s; empty-cache control rc=$ctrl (want 1); baked rc=$rc (want 0): $jit")
}

[ $# -ge 1 ] || { echo "usage: $0 tune|bench|aotcheck [...]" >&2; exit 2; }
preflight
for phase in "$@"; do
  case "$phase" in
    tune) phase_tune ;;
    bench) phase_bench ;;
    aotcheck) phase_aotcheck ;;
    *) echo "unknown phase '$phase'; accepted: tune, bench, aotcheck" >&2; exit 2 ;;
  esac
done
echo "==== summary ($(date -u +%FT%TZ)) ===="
printf '%s\n' "${SUMMARY[@]}"
[ -f "$OUT/h200_moe_configs.md" ] && sed -n '3,20p' "$OUT/h200_moe_configs.md" | sed '/^$/q'
exit 0
