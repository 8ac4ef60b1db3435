#!/bin/bash
# What is owed to an H200 in ONE lease of ≤ 30 device minutes: PLAN=h200 (default) on one or two GPUs (issue 14),
# PLAN=x8 on 8 GPUs of one host (issue 16; on 4 GPUs it runs the TP4 phases only).
#
# A device call lasts ≤ 10 min and a machine idle 30 s is given back, so the work runs in two background
# queues (setsid: they outlive the call that started them) and later calls only wait and collect:
#
#   bash benchmarks/device/h200_session.sh start          # after host_install.sh; returns at once
#   bash benchmarks/device/h200_session.sh wait 560       # ≤ 560 s per call; repeat until it prints "all done"
#
# Queue A (GPU 0) and queue B (GPU 1) run side by side; on a one-GPU machine their steps run on GPU 0 in one queue A,
# in queue_one_gpu's order. Each step starts only when its minimum time is left before the deadline (DEADLINE_S after
# `start`, default 1500 s) and is cut at the deadline, so a short lease still returns the first steps of each queue.
#   A: make test-gpu (incl. the plugin in the served engine, plugin on / off on one random FP8 checkpoint); qwen-start
#      (issue 14's baked-start goal, met with fork on 2026-12-03d), e2e mixtral and the import profile (2026-12-03b),
#      qwen-plugin, qwen-attention, the own-kernels bench (2026-12-01d) and e2e nemotron (2026-12-02) left the queues
#      (the step functions say how to put them back)
#   B: e2e nemotron-diag (the plan with prefix caching off / on, 5 reps)
#   one GPU: test-gpu → e2e nemotron-diag
# PLAN=x8: one queue X on all 8 GPUs, the e2e.sh x8-* phases in priority order (docs/h200-runbook.md "8 × H200"):
#   x8-qwen235-tp8 → x8-deepseek-tp8ep8 → x8-qwen235-tp8-start → x8-deepseek-tp8 → x8-qwen235-tp4 on GPUs 0-3
#   beside x8-mixtral8x22-tp4 on GPUs 4-7 (queue Y) → x8-maverick-tp8 → x8-qwen235-block-tp8ep8;
#   X8_STEPS="a b" runs only those (a later lease picks up what the first did not reach).
# Each step folder also gets gpu_clocks.csv, host_cpu.csv and cpu_probe.csv (one line a second, sampled beside it).
# Every step runs with NVLink multicast off (benchmarks/device/multicast_off.sh), logged at the top of its console.
# The queues run from a copy of the repo under $RUN_DIR/repo (later calls re-send the working tree).
# `wait` copies into $OUT (≤ 8 files come back): A.tar.gz and B.tar.gz (every step's results + logs) and
# status.txt (one line per step: rc, seconds). Unpack the tars here and file the numbers (RUNS.md files).
# env: RUN_DIR (default /root/h200-session), DEADLINE_S (1500; set it to the device budget left at `start` minus
#      ~120 s), FORCE=1 (restart a run in progress), VLLM_SITE (/root/site), WORKERS (compile
#      processes per queue; default a quarter of the cores so the e2e queue keeps its CPU), DRY_RUN=1 (print
#      and time the steps with `sleep 1` instead of running them: tests/benchmarks/test_h200_session.py), GPUS (how many
#      GPUs to use; default: what nvidia-smi lists), PLAN (h200 | x8), X8_STEPS (x8: the steps to run; default all).
set -uo pipefail
HERE=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=benchmarks/device/multicast_off.sh
source "$HERE/benchmarks/device/multicast_off.sh"
PLAN=${PLAN:-h200}
QUEUE_NAMES=(A B X Y)
RUN_DIR=${RUN_DIR:-/root/h200-session}
DEADLINE_S=${DEADLINE_S:-1500}
SITE=${VLLM_SITE:-/root/site}

multicast_state() {
  local k
  for k in NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS VLLM_FLASHINFER_ALLREDUCE_BACKEND; do
    printf '%s=%s ' "$k" "${!k:-unset}"
  done
}

gpu_processes() {  # pid, name, MiB of every process on the GPUs, or "none"
  [ "${DRY_RUN:-0}" = 1 ] && { echo "none (dry run)"; return; }
  local apps
  apps=$(nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2>&1 | paste -sd ';')
  echo "${apps:-none}"
}

# The GPU's clocks, power and throttle reasons, one line a second, beside each step's console (gpu_clocks.csv): the
# Nemotron rows of 2026-12-02 swung 30 % between repetitions of one engine and clocks were one suspect. The throttle
# field changed its name in newer drivers and an unknown field fails the whole query, so the first list that answers
# is used.
# shellcheck disable=SC2054  # the commas are inside values (nvidia-smi field lists), not array separators
GPU_CLOCK_FIELDS=(
  timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,clocks_event_reasons.active
  timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,clocks_throttle_reasons.active
  timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu
)

sample_gpu_clocks() {  # sample_gpu_clocks CSV: in the background until killed
  local fields
  for fields in "${GPU_CLOCK_FIELDS[@]}"; do
    if nvidia-smi --query-gpu="$fields" --format=csv >/dev/null 2>&1; then
      exec nvidia-smi --query-gpu="$fields" --format=csv -l 1 >"$1" 2>&1
    fi
  done
  echo "no nvidia-smi query answered" >"$1"
}

# The host's CPU beside it, one line a second (host_cpu.csv): Nemotron's decode step is flat in the batch (host-bound,
# docs/results/e2e.md), and one engine's repetitions ran slow for a whole repetition at a time, so time taken from
# this VM by its host (steal), other load, or a lower core clock would show here. /proc/stat's jiffies are
# cumulative: a reader takes the differences between lines.
sample_host_cpu() {  # sample_host_cpu CSV: in the background until killed
  echo "epoch_s,user,nice,system,idle,iowait,irq,softirq,steal,load1,running,mean_mhz" >"$1"
  local _cpu user nice system idle iowait irq softirq steal _rest load1 _l5 _l15 running _last mhz
  while :; do
    read -r _cpu user nice system idle iowait irq softirq steal _rest </proc/stat
    read -r load1 _l5 _l15 running _last </proc/loadavg
    mhz=$(awk '/^cpu MHz/ {s += $4; n++} END {if (n) printf "%.0f", s / n}' /proc/cpuinfo)
    echo "$(date +%s.%N),$user,$nice,$system,$idle,$iowait,$irq,$softirq,$steal,$load1,${running%/*},${mhz:-}" >>"$1"
    sleep 1
  done
}

# A single core's speed as a program sees it, one line a second (cpu_probe.csv: the milliseconds a fixed pure-Python
# loop took, best of 3): steal counts only what the hypervisor reports, not a busy sibling hyperthread or a lower
# boost clock. On 2026-12-03c every CPU-bound phase of one start (import, Dynamo, graph capture) ran 1.5-1.8x
# slower than the warm start four minutes before, with steal at 0 and one core busy; this probe tells that apart.
# shellcheck disable=SC2016  # the Python program is single-quoted on purpose
CPU_PROBE='import time
while True:
    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        sum(i * i for i in range(100_000))
        runs.append(time.perf_counter() - t0)
    print(f"{time.time():.3f},{1000 * min(runs):.3f}", flush=True)
    time.sleep(1)'
sample_cpu_speed() {  # sample_cpu_speed CSV: in the background until killed
  echo "epoch_s,probe_ms" >"$1"
  exec "${PY:-python3}" -u -c "$CPU_PROBE" >>"$1" 2>&1
}

step() {  # step QUEUE NAME MIN_S MAX_S CMD... : run CMD if MIN_S are left, cut at min(MAX_S, time left)
  local queue=$1 name=$2 min_s=$3 max_s=$4
  shift 4
  local left=$(($(cat "$RUN_DIR/deadline") - $(date +%s)))
  local dir="$RUN_DIR/$queue/$name"
  mkdir -p "$dir"
  if ((left < min_s)); then
    echo "$queue $name skipped: ${left}s left < ${min_s}s" | tee -a "$RUN_DIR/status.txt"
    return 0
  fi
  local limit=$((left < max_s ? left : max_s)) t0=$SECONDS rc
  echo "[$(date -u +%H:%M:%S)] $queue $name: start (limit ${limit}s)" >>"$RUN_DIR/$queue/queue.log"
  echo "multicast: $(multicast_state)" >"$dir/console.log"
  # 2026-12-01c: the first Nemotron engine after `make test-gpu` spread 20-48 %; a process a step leaves on the GPU
  # would do that, so each step's console starts with what holds the GPU
  echo "gpu processes: $(gpu_processes)" >>"$dir/console.log"
  if [ "${DRY_RUN:-0}" = 1 ]; then
    echo "DRY_RUN OUT=$dir $*" >>"$dir/console.log"
    sleep 1
    rc=0
  else
    # STEP_LIMIT_S: a step may get less than its maximum; the e2e harness then shortens its own budget so it
    # stops (and writes what it has) before `timeout` fires.
    local samplers=()
    sample_gpu_clocks "$dir/gpu_clocks.csv" &
    samplers+=($!)
    sample_host_cpu "$dir/host_cpu.csv" &
    samplers+=($!)
    sample_cpu_speed "$dir/cpu_probe.csv" &
    samplers+=($!)
    OUT=$dir WORK_DIR="$RUN_DIR/work-$queue" STEP_LIMIT_S=$limit timeout --kill-after=15 "$limit" "$@" \
      >>"$dir/console.log" 2>&1
    rc=$?
    kill "${samplers[@]}" 2>/dev/null
    wait "${samplers[@]}" 2>/dev/null
  fi
  echo "$queue $name rc=$rc $((SECONDS - t0))s" | tee -a "$RUN_DIR/status.txt" >>"$RUN_DIR/$queue/queue.log"
}

# Order = what each issue can least do without, cheap decisive steps first (a short lease returns those).
# `make test-gpu`'s script (a command, not a function: `timeout` runs it); the engine test's CSV and server logs land
# in the step's folder
# shellcheck disable=SC2016  # $OUT expands in the step's shell, where `step` has set it
TEST_GPU=(bash -c 'PLUGIN_LOGITS_OUT=$OUT/plugin-logits bash scripts/test_gpu.sh --junitxml="$OUT/test_gpu.xml"')

# One function per step, the queue's name as $1, so the two-GPU queues and the one-GPU order list the same steps.
# Done and so out of every queue (each is one e2e.sh phase or script, to put back for a re-run): on 2026-12-03b
# e2e mixtral with its LMI-equivalent engine (634 s: `step "$q" e2e-mixtral 300 800 env BUDGET_S=780 bash
# benchmarks/device/e2e.sh mixtral`) and the import profile (35 s: `step "$q" import-profile 40 120 bash
# benchmarks/device/import_profile.sh`, after an e2e step in the queue); on 2026-12-01d
# e2e qwen-plugin (942 s for its four engines: `step "$q" e2e-qwen-plugin 420 1000 env BUDGET_S=980 bash
# benchmarks/device/e2e.sh qwen-plugin`), e2e qwen-attention (230 s), own-kernels (281 s: `env SKIP_TESTS=1 bash
# benchmarks/device/kernels_check_and_bench.sh`); on 2026-12-02 e2e nemotron (923 s: `step "$q" e2e-nemotron 300
# 1000 env BUDGET_S=980 bash benchmarks/device/e2e.sh nemotron`; its rows spread too far to read: nemotron-diag first).

# make test-gpu (issue 15's "done when" on the GPU; 61 passed on 87641a6, 2026-12-03b, 402 s: last, to re-check
# main after GPU-side changes); a start with less would be cut inside the engine test
test_gpu_step() { step "$1" test-gpu 450 600 "${TEST_GPU[@]}"; }

# Issue 14's start of what ships: empty / warm caches and the compile-cache layer (its bake: a cold start + its
# requests, then the start from it), each start holding /health for the server's warm-up. 2026-12-03: layer 0.86x
# warm with spawn, warm with fork 0.71x, so the image forks; 2026-12-03c (fork, model info baked): empty 129 s, warm
# 48 and 57 s, layer 72 s; 2026-12-03d with one more (warm, layer) pair: layer / warm 0.92 (range 0.85-1.00), the goal
# met, so out of the queues (813 s; put back with `qwen_start_step "$1"`); the warm-spawn row
# (`START_MODES=warm,warm-spawn`) is left out
qwen_start_step() {
  step "$1" qwen-start 300 960 env BUDGET_S=940 START_MODES=warm bash benchmarks/device/e2e.sh qwen-start
}

# why one Nemotron engine's repetitions spread 3-39 %: prefix caching off and on, 5 reps (~2 × 300 s; 2026-12-03c:
# 511 s, the first variant cut after one repetition; clocks, throttling, steal and piecewise graphs ruled out;
# 2026-12-03d: 545 s, both variants 5 reps, spread 10-35 % either way, so not prefix caching, and r = 0.23 against
# the CPU probe). Kept as the control beside the next diagnosis (where the engine's busy threads are placed).
nemotron_diag_step() {
  step "$1" e2e-nemotron-diag 360 660 env BUDGET_S=640 bash benchmarks/device/e2e.sh nemotron-diag
}

queue_a() { test_gpu_step "$1"; }
queue_b() { nemotron_diag_step "$1"; }

# One GPU (~1450 s of a lease after the install): make test-gpu on the main of the day (last passed 2026-12-03c on
# 915a3fd), then the Nemotron diagnosis (its rows still cannot be read)
queue_one_gpu() { test_gpu_step "$1"; nemotron_diag_step "$1"; }

wanted() {  # wanted STEP: listed in X8_STEPS (space-separated), or X8_STEPS unset
  [ -z "${X8_STEPS:-}" ] || [[ " $X8_STEPS " == *" $1 "* ]]
}

x8_step() {  # x8_step QUEUE PHASE MIN_S MAX_S [GPUS]: one e2e.sh x8 phase, its harness budget 30 s inside its limit
  local queue=$1 name=$2 min_s=$3 max_s=$4 gpus=${5:-}
  wanted "$name" || return 0
  local on=()
  [ -n "$gpus" ] && on=("CUDA_VISIBLE_DEVICES=$gpus")
  step "$queue" "$name" "$min_s" "$max_s" env "${on[@]}" BUDGET_S=$((max_s - 30)) bash benchmarks/device/e2e.sh "$name"
}

# Issue 16 on 8 GPUs, most decisive first: the rule at TP8 with its TP8 tiles and the 4096-token TTFT (qwen235-tp8),
# expert parallelism through the resolver's argv (one engine: plan = auto), the baked cache on every rank and the
# cold / warm / copied / baked starts, DeepSeek's TP8 tiles against vLLM's, the two TP4 models side by side, then
# Maverick (the architecture least sure to load) and the block control at EP8. MIN_S: one engine measured whole.
# The EP phases measure triton first: their plan (FlashInfer CUTLASS block) needs an unpruned FlashInfer module.
queue_x8() {
  local q=$1
  x8_step "$q" x8-qwen235-tp8 600 1200
  x8_step "$q" x8-deepseek-tp8ep8 450 1000
  x8_step "$q" x8-qwen235-tp8-start 700 1300
  x8_step "$q" x8-deepseek-tp8 600 1300
  # Side by side on the two halves (queue Y has its own folder and work dir); the queue goes on when both end.
  x8_step "$q" x8-qwen235-tp4 600 1500 0,1,2,3 &
  x8_step Y x8-mixtral8x22-tp4 600 1100 4,5,6,7 &
  wait
  x8_step "$q" x8-maverick-tp8 500 1200
  x8_step "$q" x8-qwen235-block-tp8ep8 400 900
}

queue_x4() {  # PLAN=x8 on 4 GPUs: the TP4 phases, one after the other
  local q=$1
  x8_step "$q" x8-qwen235-tp4 600 1500
  x8_step "$q" x8-mixtral8x22-tp4 600 1100
}

run_queue() {  # run_queue NAME GPU FUNCTIONS...: a new session (setsid) outlives the device call that starts it
  local name=$1
  mkdir -p "$RUN_DIR/$name"
  setsid bash "$RUN_DIR/repo/benchmarks/device/h200_session.sh" _queue "$@" </dev/null \
    >>"$RUN_DIR/$name/queue.log" 2>&1 &
}

queue_main() {  # (in the queue's own session) NAME GPU FUNCTIONS...
  local name=$1
  export CUDA_VISIBLE_DEVICES=$2
  shift 2
  cd "$RUN_DIR/repo" || exit 1
  local fn
  for fn in "$@"; do "$fn" "$name"; done
  touch "$RUN_DIR/$name/done"
}

start() {
  # A retried call 3 on a warm machine must not wipe a live run and start two more queues on the same GPUs.
  if [ -f "$RUN_DIR/deadline" ] && ! all_done && [ "${FORCE:-0}" != 1 ]; then
    echo "h200_session: a run is in progress under $RUN_DIR (FORCE=1 restarts it); collecting instead" >&2
    return 0
  fi
  # vLLM loads the engine plugin from package metadata only (benchmarks/device/register_entry_points.py); first, so
  # a failure leaves no half-started run behind
  if [ "${DRY_RUN:-0}" != 1 ]; then
    PYTHONPATH="$HERE" python3 -m benchmarks.device.register_entry_points "$SITE" || return 1
  fi
  rm -rf "$RUN_DIR"
  mkdir -p "$RUN_DIR"
  echo $(($(date +%s) + DEADLINE_S)) >"$RUN_DIR/deadline"
  local gpus=${GPUS:-}
  [ -n "$gpus" ] || gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  # The queues run from a private copy: every later device call re-sends the working tree into $HERE,
  # and the tune step writes new tile files into its kernels/configs.
  mkdir -p "$RUN_DIR/repo"
  tar -C "$HERE" --exclude=./.git --exclude=./.offline --exclude=./.whl --exclude=./.venv --exclude=./build \
    --exclude=./.artifacts -cf - . | tar -C "$RUN_DIR/repo" -xf - || exit 1
  export PYTHONPATH="$SITE:$RUN_DIR/repo${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
  export WORKERS=${WORKERS:-$(($(nproc) / 4 > 1 ? $(nproc) / 4 : 1))}
  if [ "$PLAN" = x8 ]; then
    if ((gpus >= 8)); then
      echo X >"$RUN_DIR/queues"
      run_queue X 0,1,2,3,4,5,6,7 queue_x8
    elif ((gpus >= 4)); then
      echo X >"$RUN_DIR/queues"
      run_queue X 0,1,2,3 queue_x4
    else
      echo "h200_session: PLAN=x8 needs 8 GPUs (or 4 for its TP4 phases); nvidia-smi lists $gpus" >&2
      rm -f "$RUN_DIR/deadline"
      return 3
    fi
    echo "h200_session: x8 queue on $gpus GPUs (multicast off: $(multicast_state)), deadline in ${DEADLINE_S}s"
  elif ((gpus >= 2)); then
    echo "A B" >"$RUN_DIR/queues"
    run_queue A 0 queue_a
    run_queue B 1 queue_b
    echo "h200_session: 2 queues on GPUs 0 and 1, deadline in ${DEADLINE_S}s, logs under $RUN_DIR"
  else
    ((gpus == 1)) || echo "h200_session: no GPU seen by nvidia-smi; running anyway on device 0" >&2
    echo A >"$RUN_DIR/queues"
    run_queue A 0 queue_one_gpu
    echo "h200_session: 1 queue on GPU 0, deadline in ${DEADLINE_S}s, logs under $RUN_DIR"
  fi
}

all_done() {  # every queue start launched has finished (queue Y runs inside X: X's done covers it)
  [ -f "$RUN_DIR/queues" ] || return 1
  local q queues
  read -ra queues <"$RUN_DIR/queues"
  for q in "${queues[@]}"; do
    [ -f "$RUN_DIR/$q/done" ] || return 1
  done
}

wait_and_collect() {  # wait_and_collect SECONDS
  # 2026-12-02c: the machine was given back between two calls and this `wait` ran on a fresh one, which had no run:
  # it slept its whole 540 s and said "still running". No run here is said at once, so the call costs a second.
  if [ ! -f "$RUN_DIR/deadline" ]; then
    echo "h200_session: no run on this machine (no $RUN_DIR/deadline: a fresh machine? the last one was given back" \
      "and what it ran is lost); nothing to wait for" >&2
    return 4
  fi
  local until=$((SECONDS + ${1:-560}))
  while ! all_done && ((SECONDS < until)); do
    sleep 5
  done
  local q
  for q in "${QUEUE_NAMES[@]}"; do
    [ -d "$RUN_DIR/$q" ] || continue
    echo "== queue $q: $(tail -n 1 "$RUN_DIR/$q/queue.log" 2>/dev/null)"
  done
  mkdir -p "${OUT:?wait needs OUT}"
  cp "$RUN_DIR/status.txt" "$OUT/" 2>/dev/null
  for q in "${QUEUE_NAMES[@]}"; do
    # Work dirs hold model copies and Triton caches: results and logs only.
    [ -d "$RUN_DIR/$q" ] && tar -czf "$OUT/$q.tar.gz" -C "$RUN_DIR" "$q"
  done
  if all_done; then echo "h200_session: all done"; else echo "h200_session: still running"; fi
}

case "${1:-}" in
  start) start || exit $? ;;
  wait) wait_and_collect "${2:-560}" || exit $? ;;
  status) cat "$RUN_DIR/status.txt" 2>/dev/null; all_done && echo "all done" ;;
  _queue) shift; queue_main "$@" ;;
  *) echo "usage: h200_session.sh start | wait SECONDS | status" >&2; exit 2 ;;
esac
