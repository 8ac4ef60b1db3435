#!/bin/bash
# What is owed to an H200 in ONE lease of ≤ 30 device minutes, on one or two GPUs (now: issue 14).
#
# A device call lasts ≤ 10 min and a machine idle 30 s is given back, so the work runs in two background
# queues (setsid: they outlive the call that started them) and later calls only wait and collect:
#
#   bash benchmarks/device/h200_session.sh start          # after host_install.sh; returns at once
#   bash benchmarks/device/h200_session.sh wait 560       # ≤ 560 s per call; repeat until it prints "all done"
#
# Queue A (GPU 0) and queue B (GPU 1) run side by side; on a one-GPU machine A then B run on GPU 0 in one
# queue. Each step starts only when its minimum time is left before the deadline (DEADLINE_S after `start`,
# default 1500 s) and is cut at the deadline, so a short lease still returns the first steps of each queue.
#   A: e2e nemotron → e2e mixtral (served configuration: plan / auto / triton)
#   B: qwen-start (plan's start from empty / warm / copied / baked caches, bake made here) → own kernels check
# The queues run from a copy of the repo under $RUN_DIR/repo (later calls re-send the working tree).
# `wait` copies into $OUT (≤ 8 files come back): A.tar.gz and B.tar.gz (every step's results + logs) and
# status.txt (one line per step: rc, seconds). Unpack the tars here and file the numbers (RUNS.md files).
# env: RUN_DIR (default /root/h200-session), DEADLINE_S (1500; set it to the device budget left at `start` minus
#      ~120 s), FORCE=1 (restart a run in progress), VLLM_SITE (/root/site), WORKERS (compile
#      processes per queue; default a quarter of the cores so the e2e queue keeps its CPU), DRY_RUN=1 (print
#      and time the steps with `sleep 1` instead of running them: tests/benchmarks/test_h200_session.py), GPUS (how many
#      GPUs to use; default: what nvidia-smi lists).
set -uo pipefail
HERE=$(cd "$(dirname "$0")/../.." && pwd)
RUN_DIR=${RUN_DIR:-/root/h200-session}
DEADLINE_S=${DEADLINE_S:-1500}
SITE=${VLLM_SITE:-/root/site}

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
  if [ "${DRY_RUN:-0}" = 1 ]; then
    echo "DRY_RUN OUT=$dir $*" >"$dir/console.log"
    sleep 1
    rc=0
  else
    # STEP_LIMIT_S: a step may get less than its maximum; the e2e harness then shortens its own budget so it
    # stops (and writes what it has) before `timeout` fires.
    OUT=$dir WORK_DIR="$RUN_DIR/work-$queue" STEP_LIMIT_S=$limit timeout --kill-after=15 "$limit" "$@" \
      >"$dir/console.log" 2>&1
    rc=$?
  fi
  echo "$queue $name rc=$rc $((SECONDS - t0))s" | tee -a "$RUN_DIR/status.txt" >>"$RUN_DIR/$queue/queue.log"
}

# Order = what each issue can least do without, cheap decisive steps first (a short lease returns those).
# Issue 14, second lease: Nemotron and Mixtral in the served configuration (2026-12-01 measured Qwen3), then the
# baked-start check with a bake made on this host, then the GPU check of the code issue 13 moved (own kernels).
queue_a() {
  local q=$1
  step "$q" e2e-nemotron 300 600 env BUDGET_S=580 bash benchmarks/device/e2e.sh nemotron
  step "$q" e2e-mixtral 300 660 env BUDGET_S=640 bash benchmarks/device/e2e.sh mixtral
}

queue_b() {
  local q=$1
  step "$q" qwen-start 300 480 env BUDGET_S=460 bash benchmarks/device/e2e.sh qwen-start
  step "$q" own-kernels 240 600 bash benchmarks/device/kernels_check_and_bench.sh
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
  if ((gpus >= 2)); then
    run_queue A 0 queue_a
    run_queue B 1 queue_b
    echo "h200_session: 2 queues on GPUs 0 and 1, deadline in ${DEADLINE_S}s, logs under $RUN_DIR"
  else
    ((gpus == 1)) || echo "h200_session: no GPU seen by nvidia-smi; running anyway on device 0" >&2
    run_queue A 0 queue_a queue_b
    touch "$RUN_DIR/B.skip"
    echo "h200_session: 1 queue (A then B) on GPU 0, deadline in ${DEADLINE_S}s, logs under $RUN_DIR"
  fi
}

all_done() {
  [ -f "$RUN_DIR/A/done" ] && { [ -f "$RUN_DIR/B/done" ] || [ -f "$RUN_DIR/B.skip" ]; }
}

wait_and_collect() {  # wait_and_collect SECONDS
  local until=$((SECONDS + ${1:-560}))
  while ! all_done && ((SECONDS < until)); do
    sleep 5
  done
  local q
  for q in A B; do
    [ -d "$RUN_DIR/$q" ] || continue
    echo "== queue $q: $(tail -n 1 "$RUN_DIR/$q/queue.log" 2>/dev/null)"
  done
  mkdir -p "${OUT:?wait needs OUT}"
  cp "$RUN_DIR/status.txt" "$OUT/" 2>/dev/null
  for q in A B; do
    # Work dirs hold model copies and Triton caches: results and logs only.
    [ -d "$RUN_DIR/$q" ] && tar -czf "$OUT/$q.tar.gz" -C "$RUN_DIR" "$q"
  done
  if all_done; then echo "h200_session: all done"; else echo "h200_session: still running"; fi
}

case "${1:-}" in
  start) start ;;
  wait) wait_and_collect "${2:-560}" ;;
  status) cat "$RUN_DIR/status.txt" 2>/dev/null; all_done && echo "all done" ;;
  _queue) shift; queue_main "$@" ;;
  *) echo "usage: h200_session.sh start | wait SECONDS | status" >&2; exit 2 ;;
esac
