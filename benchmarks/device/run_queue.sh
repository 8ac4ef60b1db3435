#!/bin/bash
# Runs queues of measurement steps on a GPU host, each queue in its own session (setsid), so the shell that
# started them may exit; `wait` then collects. A queue is a data file (benchmarks/device/queues/*.txt):
#
#   # comment
#   NAME MIN_S MAX_S COMMAND...        a step: COMMAND runs if MIN_S seconds are left before the deadline,
#                                      cut at min(MAX_S, seconds left)
#   NAME MIN_S MAX_S COMMAND... &      runs beside the steps that follow, until the next `wait` line
#   wait
#
# COMMAND is one shell command line, run by bash from a copy of the repository, with OUT (the step's folder),
# WORK_DIR (the queue's scratch; a step run with `&` gets its own) and STEP_LIMIT_S (its limit) exported.
#
#   bash benchmarks/device/run_queue.sh start QUEUE[@GPUS] ...   QUEUE: a file, or a name in benchmarks/device/queues/;
#                                                                 GPUS: that queue's CUDA_VISIBLE_DEVICES
#   bash benchmarks/device/run_queue.sh wait SECONDS             wait ≤ SECONDS for every queue, then pack
#   bash benchmarks/device/run_queue.sh status                   one line per step so far
#   bash benchmarks/device/run_queue.sh check QUEUE ...          parse only
#
# `wait` copies into $OUT: status.txt (one line per step: rc and seconds, or why it was skipped) and one
# QUEUE.tar.gz per queue (every step's folder: console.log, its results, and gpu_clocks.csv, host_cpu.csv and
# cpu_probe.csv, sampled once a second beside it). Every step runs with NVLink multicast off (multicast_off.sh).
# env: RUN_DIR (default /root/queue-run), DEADLINE_S (seconds after `start` when no new step starts and running
#      ones are cut; default 1500), FORCE=1 (restart a run in progress), VLLM_SITE (the offline engine bundle,
#      default /root/site: put on PYTHONPATH, and the project's entry points registered there when it exists),
#      STEPS (space-separated step names: run only these, in the queue file's order; a name no queue has is
#      refused before anything starts).
set -uo pipefail
HERE=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=benchmarks/device/multicast_off.sh
source "$HERE/benchmarks/device/multicast_off.sh"
RUN_DIR=${RUN_DIR:-/root/queue-run}
DEADLINE_S=${DEADLINE_S:-1500}
SITE=${VLLM_SITE:-/root/site}
QUEUES_DIR=$HERE/benchmarks/device/queues

multicast_state() {
  local k
  for k in NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS VLLM_FLASHINFER_ALLREDUCE_BACKEND; do
    printf '%s=%s ' "$k" "${!k:-unset}"
  done
}

gpu_processes() {  # pid, name, MiB of every process on the GPUs, or "none"
  command -v nvidia-smi >/dev/null || { echo "none (no nvidia-smi)"; return; }
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
# docs/results/nemotron.md), and one engine's repetitions ran slow for a whole repetition at a time, so time taken
# from this VM by its host (steal), other load, or a lower core clock would show here. /proc/stat's jiffies are
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

step() {  # step QUEUE NAME MIN_S MAX_S WORK_DIR COMMAND: run COMMAND if MIN_S are left, cut at min(MAX_S, time left)
  local queue=$1 name=$2 min_s=$3 max_s=$4 work=$5 command=$6
  local left=$(($(cat "$RUN_DIR/deadline") - $(date +%s)))
  local dir="$RUN_DIR/$queue/$name"
  mkdir -p "$dir"
  if ((left < min_s)); then
    echo "$queue $name skipped: ${left}s left < ${min_s}s" | tee -a "$RUN_DIR/status.txt" >>"$RUN_DIR/$queue/queue.log"
    return 0
  fi
  local limit=$((left < max_s ? left : max_s)) t0=$SECONDS rc samplers=()
  echo "[$(date -u +%H:%M:%S)] $queue $name: start (limit ${limit}s)" >>"$RUN_DIR/$queue/queue.log"
  {
    echo "multicast: $(multicast_state)"
    # 2026-12-01c: the first Nemotron engine after `make test-gpu` spread 20-48 %; a process a step leaves on the
    # GPU would do that, so each step's console starts with what holds the GPU
    echo "gpu processes: $(gpu_processes)"
    echo "command: $command"
  } >"$dir/console.log"
  # the three files exist before their samplers start: a step shorter than a sampler's first line (its subshell
  # start, nvidia-smi's probe) still leaves them, empty (a loaded CI machine lost gpu_clocks.csv that way)
  : >"$dir/gpu_clocks.csv"
  : >"$dir/host_cpu.csv"
  : >"$dir/cpu_probe.csv"
  sample_gpu_clocks "$dir/gpu_clocks.csv" &
  samplers+=($!)
  sample_host_cpu "$dir/host_cpu.csv" &
  samplers+=($!)
  sample_cpu_speed "$dir/cpu_probe.csv" &
  samplers+=($!)
  # STEP_LIMIT_S: a step may get less than its maximum; the e2e harness then shortens its own budget so it stops
  # (and writes what it has) before `timeout` fires.
  OUT=$dir WORK_DIR=$work STEP_LIMIT_S=$limit timeout --kill-after=15 "$limit" bash -c "$command" \
    </dev/null >>"$dir/console.log" 2>&1
  rc=$?
  kill "${samplers[@]}" 2>/dev/null
  wait "${samplers[@]}" 2>/dev/null
  echo "$queue $name rc=$rc $((SECONDS - t0))s" | tee -a "$RUN_DIR/status.txt" >>"$RUN_DIR/$queue/queue.log"
}

wanted() {  # wanted STEP: listed in STEPS, or STEPS unset
  [ -z "${STEPS:-}" ] || [[ " $STEPS " == *" $1 "* ]]
}

parse_line() {  # parse_line LINE: sets NAME MIN_S MAX_S COMMAND BESIDE (1 for a trailing `&`); 1 if not a step
  local line=$1
  BESIDE=0
  read -r NAME MIN_S MAX_S COMMAND <<<"$line"
  [[ "$MIN_S" =~ ^[0-9]+$ && "$MAX_S" =~ ^[0-9]+$ && -n "$COMMAND" ]] || return 1
  if [[ "$COMMAND" =~ ^(.*[^[:space:]&])[[:space:]]*\&$ ]]; then
    COMMAND=${BASH_REMATCH[1]}
    BESIDE=1
  fi
}

QUEUE_STEPS=" "  # every step name check_queue has read, in the files' order (check_steps reads it)

check_queue() {  # check_queue FILE: every line a comment, a step or `wait`; names unique
  local file=$1 line n=0 bad=0 names=" "
  if [ ! -f "$file" ]; then
    # 2026-12-07: `start h100` on an H100; queues are named by GPU count (h200 is any one GPU), so list them
    local known
    known=$(find "$QUEUES_DIR" -maxdepth 1 -name '*.txt' -printf '%f\n' 2>/dev/null | sed 's/\.txt$//' | sort | tr '\n' ' ')
    echo "run_queue: $file: no such queue file; the shipped queues: ${known% } (h200 runs on any one GPU)" >&2
    return 2
  fi
  while IFS= read -r line || [ -n "$line" ]; do
    n=$((n + 1))
    line=${line%%[[:space:]]}
    [[ -z "${line// /}" || "$line" =~ ^[[:space:]]*# || "$line" =~ ^[[:space:]]*wait$ ]] && continue
    if ! parse_line "$line"; then
      echo "run_queue: $file:$n: expected NAME MIN_S MAX_S COMMAND [&], got: $line" >&2
      bad=1
    elif [[ "$names" == *" $NAME "* ]]; then
      echo "run_queue: $file:$n: step $NAME appears twice" >&2
      bad=1
    fi
    names+="$NAME "
  done <"$file"
  QUEUE_STEPS+="${names# }"
  return $((bad * 2))
}

check_steps() {  # check_steps (after check_queue on each queue): every name in STEPS is one of their steps; says
  # what runs, in which order
  [ -n "${STEPS:-}" ] || return 0
  local known=$QUEUE_STEPS step order=() bad=0
  for step in $STEPS; do
    [[ "$known" == *" $step "* ]] && continue
    echo "run_queue: STEPS names '$step', a step of no queue given; accepted:${known% }" >&2
    bad=1
  done
  ((bad)) && return 2
  for step in $known; do [[ " $STEPS " == *" $step "* ]] && order+=("$step"); done
  # the queue file, not STEPS, orders them (2026-12-06d: a session expected STEPS's order)
  echo "run_queue: STEPS: ${order[*]} (the queue file's order)"
}

queue_file() {  # queue_file QUEUE: a path as given, else benchmarks/device/queues/QUEUE.txt
  if [ -f "$1" ]; then echo "$1"; else echo "$QUEUES_DIR/$1.txt"; fi
}

queue_main() {  # (in the queue's own session) NAME: runs $RUN_DIR/NAME/queue.txt from the repository copy
  local name=$1 line
  cd "$RUN_DIR/repo" || exit 1
  while IFS= read -r line || [ -n "$line" ]; do
    [[ "$line" =~ ^[[:space:]]*wait[[:space:]]*$ ]] && { wait; continue; }
    parse_line "$line" || continue
    wanted "$NAME" || continue
    if ((BESIDE)); then
      step "$name" "$NAME" "$MIN_S" "$MAX_S" "$RUN_DIR/work-$name-$NAME" "$COMMAND" &
    else
      step "$name" "$NAME" "$MIN_S" "$MAX_S" "$RUN_DIR/work-$name" "$COMMAND"
    fi
  done <"$RUN_DIR/$name/queue.txt"
  wait
  touch "$RUN_DIR/$name/done"
}

start() {  # start QUEUE[@GPUS] ...
  (($#)) || { echo "usage: run_queue.sh start QUEUE[@GPUS] ..." >&2; return 2; }
  # A second start on the same host must not wipe a live run and start more queues on the same GPUs.
  if [ -f "$RUN_DIR/deadline" ] && ! all_done && [ "${FORCE:-0}" != 1 ]; then
    echo "run_queue: a run is in progress under $RUN_DIR (FORCE=1 restarts it); collecting instead" >&2
    return 0
  fi
  local spec file name names=() files=() gpus=()
  for spec in "$@"; do
    file=$(queue_file "${spec%@*}")
    check_queue "$file" || return 2
    name=$(basename "$file" .txt)
    [[ " ${names[*]} " == *" $name "* ]] && { echo "run_queue: queue $name given twice" >&2; return 2; }
    names+=("$name")
    files+=("$file")
    if [[ "$spec" == *@* ]]; then gpus+=("${spec##*@}"); else gpus+=("-"); fi
  done
  check_steps || return 2
  # vLLM loads the engine plugin from package metadata only (benchmarks/device/register_entry_points.py); first, so
  # a failure leaves no half-started run behind
  if [ -d "$SITE" ]; then
    PYTHONPATH="$HERE" "${PY:-python3}" -m benchmarks.device.register_entry_points "$SITE" || return 1
  fi
  rm -rf "$RUN_DIR"
  mkdir -p "$RUN_DIR/repo"
  echo $(($(date +%s) + DEADLINE_S)) >"$RUN_DIR/deadline"
  # The queues run from a copy: edits to the checkout while they run, or a tuning step's new tile files under
  # kernels/configs, do not mix into the run.
  tar -C "$HERE" --exclude=./.git --exclude=./.offline --exclude=./.whl --exclude=./.venv --exclude=./build \
    --exclude=./.artifacts -cf - . | tar -C "$RUN_DIR/repo" -xf - || return 1
  export PYTHONPATH="$SITE:$RUN_DIR/repo${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
  echo "${names[*]}" >"$RUN_DIR/queues"
  local i
  for i in "${!names[@]}"; do
    name=${names[$i]}
    mkdir -p "$RUN_DIR/$name"
    cp "${files[$i]}" "$RUN_DIR/$name/queue.txt"
    (
      [ "${gpus[$i]}" = - ] || export CUDA_VISIBLE_DEVICES=${gpus[$i]}
      setsid bash "$RUN_DIR/repo/benchmarks/device/run_queue.sh" _queue "$name" </dev/null \
        >>"$RUN_DIR/$name/queue.log" 2>&1 &
    )
    echo "run_queue: queue $name (${files[$i]}) on GPUs ${gpus[$i]/-/as visible}"
  done
  echo "run_queue: deadline in ${DEADLINE_S}s, multicast off ($(multicast_state)), logs under $RUN_DIR"
}

all_done() {  # every queue `start` launched has finished
  [ -f "$RUN_DIR/queues" ] || return 1
  local q queues
  read -ra queues <"$RUN_DIR/queues"
  for q in "${queues[@]}"; do
    [ -f "$RUN_DIR/$q/done" ] || return 1
  done
}

wait_and_collect() {  # wait_and_collect SECONDS
  if [ ! -f "$RUN_DIR/deadline" ]; then
    echo "run_queue: no run under $RUN_DIR (no deadline file); nothing to wait for" >&2
    return 4
  fi
  local until=$((SECONDS + ${1:-560})) q queues
  while ! all_done && ((SECONDS < until)); do
    sleep 2
  done
  read -ra queues <"$RUN_DIR/queues"
  mkdir -p "${OUT:?wait needs OUT}"
  cp "$RUN_DIR/status.txt" "$OUT/" 2>/dev/null
  for q in "${queues[@]}"; do
    echo "== queue $q: $(tail -n 1 "$RUN_DIR/$q/queue.log" 2>/dev/null)"
    # the work dirs hold model copies and Triton caches: results and logs only
    tar -czf "$OUT/$q.tar.gz" -C "$RUN_DIR" "$q"
  done
  if all_done; then echo "run_queue: all done"; else echo "run_queue: still running"; fi
}

case "${1:-}" in
  start) shift; start "$@" || exit $? ;;
  wait) wait_and_collect "${2:-560}" || exit $? ;;
  status) cat "$RUN_DIR/status.txt" 2>/dev/null; if all_done; then echo "all done"; fi ;;
  check) shift; for q in "$@"; do check_queue "$(queue_file "$q")" || exit $?; done ;;
  _queue) queue_main "$2" ;;
  *) echo "usage: run_queue.sh start QUEUE[@GPUS] ... | wait SECONDS | status | check QUEUE ..." >&2; exit 2 ;;
esac
