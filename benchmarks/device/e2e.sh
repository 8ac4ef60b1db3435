#!/bin/bash
# The one command for the H200: end-to-end benchmark of the served configuration (issue 14), one phase per run.
# Every engine is the real server started with the argv and environment `python -m entrypoint serve` execs
# (benchmarks/e2e/served.py): torch.compile and CUDA graphs as vLLM defaults them, measured over HTTP.
#
# usage (repo root, on the GPU host):  bash benchmarks/device/e2e.sh [PHASE]
#   PHASE  prepare (a queue's first step: FlashInfer's JIT and vLLM's model info for the work dir, once) |
#          qwen (default) | qwen-start | qwen-plugin | qwen-attention | plugin-logits | engine-check | routing |
#          routing-cost | nemotron | nemotron-split | nemotron-diag | nemotron-pin |
#          mixtral | control |
#          fi-diag | all   (see benchmarks/e2e/README.md)
#          8 x H200 (issue 16; benchmarks/README.md, "8 GPUs of one host"): x8-qwen235-tp8 | x8-qwen235-tp8-start |
#          x8-deepseek-tp8ep8 | x8-deepseek-tp8 | x8-qwen235-tp4 | x8-mixtral8x22-tp4 | x8-maverick-tp8 |
#          x8-qwen235-block-tp8ep8: plan vs vLLM auto, conc 1/8/64/128 at 512 in / 256 out + a 4096-token row,
#          planned for the GPUs this process sees (--plan-num-gpus; TP8 phases need 8, TP4 phases 4)
#          qwen also times the plan's start from empty, warm, copied and baked caches (start_breakdown.csv;
#          the baked Triton cache is made first by `kernels.aot bake` for the Qwen3 shape) and runs the
#          streaming-at-load check (stream_check.csv: LMI jsonlines / OpenAI SSE on /invocations / /v1/completions)
# env:     OUT       where results go (default /tmp/e2e-out): h200_e2e.csv/.md/.png, h200_e2e_raw.json,
#                    engines.log (condensed engine logs), e2e_console.log — 6 files, one folder (fi-diag adds
#                    fi_autotune_on.log.gz and autotune-off/).
#          BUDGET_S  wall-clock budget of the phase (default 540: fits a 600 s command limit); each harness run gets
#                    what is left of it when it starts (after a bake or a tune; a variant: its share)
#          STEP_LIMIT_S  set by run_queue.sh: the step's hard limit; BUDGET_S is cut to fit it
#          WORK_DIR  the harness's scratch (model copies, per-engine caches and logs; default /tmp/e2e-bench-work):
#                    give each of two phases running side by side on two GPUs its own
#          VLLM_SITE where the offline engine bundle is unpacked (default /root/site)
#          VLLM_PIECES  pieces dir of the offline bundle; installed first if VLLM_SITE lacks .ok
#          START_MODES  (qwen-start) the restarts after the cold one (default warm,copied,baked)
#          BAKED_CACHE  (qwen) a `python -m kernels.aot bake --shapes qwen3-30b-a3b:tp1` cache, at its baked path
#                    (x8-qwen235-tp8-start: --shapes qwen3-235b-a22b:tp8)
#          GPUS      how many GPUs the phase may use (default: CUDA_VISIBLE_DEVICES's entries, else nvidia-smi's)
#          PLAN_VLLM_VERSION  plan for this vLLM (--plan-vllm-version; default the installed one)
#          ROUTING   the expert routing of every engine (--routing; benchmarks/e2e/routing.py): unset, the
#                    harness's default uniform_one_launch (uniform, one kernel a layer; dummy weights otherwise send a
#                    batch's sequences to the same few experts), uniform_random (the same through vLLM's
#                    simulator, 0.43 ms a step dearer), hot_experts (skewed, the lab's plugin) or dummy (the weights'
#                    own collapsed routing, a labelled control only)
#          CONC      (routing) the concurrencies, default 1,2,4,8,16,32,64,128
#          MODEL     (routing, routing-cost) the bundled model, default qwen3-30b-a3b-fp8-static
#          LONG_CONC (routing) the concurrencies of the 4096-token row, default 1; 0: no such row
#          ROUTINGS  (routing-cost) the routings compared, space-separated, default "uniform_one_launch dummy"
#          MIN_VARIANT_S  (phases of one run per variant) the least budget a variant's run gets while that much is
#                    left (default 260, raised to the harness's own need for its first engine), before an even share.
#                    Each variant is one side of a comparison: a budget that cannot start every variant's first
#                    engine is refused (exit 2) before anything runs
#          DRY_RUN=1 plan only: the harness prints each row's server argv and environment (--dry-run), no bake,
#                    no GPU needed (tests/benchmarks/test_e2e_phases.py runs every x8 phase this way)
# Every engine runs in its own subprocess with its own timeout; the harness writes what it has after each
# engine, so a killed or over-budget run still leaves its CSV. A run that compares backends and whose budget
# cannot start its first two engines (the harness's estimates) is refused before anything runs (exit 2).
# shellcheck disable=SC2054  # the commas are inside values (--backends a,b), not array separators
set -uo pipefail
PHASE=${1:-qwen}
OUT=${OUT:-/tmp/e2e-out}
BUDGET_S=${BUDGET_S:-540}
# Under run_queue.sh a step may get less than its maximum (STEP_LIMIT_S): stop and write before its `timeout`.
if [ -n "${STEP_LIMIT_S:-}" ] && ((STEP_LIMIT_S - 30 < BUDGET_S)); then BUDGET_S=$((STEP_LIMIT_S - 30)); fi
WORK=${WORK_DIR:-/tmp/e2e-bench-work}
SITE=${VLLM_SITE:-/root/site}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUT"
cd "$HERE" || exit 1
# shellcheck source=benchmarks/device/multicast_off.sh
source "$HERE/benchmarks/device/multicast_off.sh"
DRY=()
[ "${DRY_RUN:-0}" = 1 ] && DRY=(--dry-run)

visible_gpus() {
  if [ -n "${GPUS:-}" ]; then echo "$GPUS"
  elif [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .
  else nvidia-smi -L 2>/dev/null | grep -c '^GPU '
  fi
}

# Seconds of the phase spent so far. A dry run plans with the worst case instead of measuring: a bake or a tune
# takes its whole timeout, a variant its whole share (the queue check, tests/benchmarks/test_queue_budgets.py, reads
# what each harness run is then given).
PLANNED_S=0
spent_s() { if [ "${DRY_RUN:-0}" = 1 ]; then echo "$PLANNED_S"; else echo "$SECONDS"; fi; }

bake() {  # bake SHAPES: the image's baked Triton cache for these shapes, made here with this host's Triton
  BAKED=${BAKED_CACHE:-$WORK/baked-triton}
  [ -d "$BAKED" ] && return 0
  if [ "${DRY_RUN:-0}" = 1 ]; then PLANNED_S=$((PLANNED_S + ${BAKE_TIMEOUT_S:-240} + 120)); return 0; fi
  timeout "${BAKE_TIMEOUT_S:-240}" python3 -m kernels.aot bake --cache-dir "$BAKED" \
    --shapes "$1" --workers "$(nproc)" >"$OUT/aot_bake.log" 2>&1 || echo "bake failed" >&2
  # our fused-MoE kernel at the dispatch table's M for the same shape, as the image's aot stage bakes it
  timeout 120 python3 -m ops.fused_moe_fp8_aot --bake "$BAKED" --shapes "$1" >>"$OUT/aot_bake.log" 2>&1 ||
    echo "bake of our kernel failed" >&2
}

if [ ! -f "$SITE/.ok" ] && [ -n "${VLLM_PIECES:-}" ]; then
  bash "$VLLM_PIECES/host_install.sh" "$VLLM_PIECES" "$(dirname "$SITE")" || exit 1
fi
[ -d "$SITE" ] && export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
# vLLM finds the engine plugin through package metadata, which a checkout on PYTHONPATH lacks (2026-12-01: the plan
# row ran without our kernel); the image installs the package instead
if [ -d "$SITE" ] && [ "${DRY_RUN:-0}" != 1 ]; then python3 -m benchmarks.device.register_entry_points "$SITE"; fi

# A queue's first step (benchmarks/device/queues/*.txt): what every later step of the queue's work dir shares, made
# once before any step's budget starts. On a fresh host FlashInfer's JIT took 121 s and the model info 41 s, where a
# warm work dir takes ~15 s (an H100, 2026-12-05e: the first variant of routing-cost spent its share on them).
if [ "$PHASE" = prepare ]; then
  if [ "${DRY_RUN:-0}" = 1 ]; then echo "e2e.sh: prepare $WORK (dry run: nothing made)"; exit 0; fi
  exec python3 -m benchmarks.e2e prepare --work-dir "$WORK" --timeout-s "$BUDGET_S"
fi

# --plan-gpu: the plan row is what `serve` would run on an H200, whether or not NVML answers in this process.
# plan (with our kernel where the dispatch table has the shape) vs the plan with vLLM's kernels only
# (plan_vllm_kernel = option.moe_kernel=vllm) vs auto (vLLM's own choice) vs triton on vLLM's default tiles (what
# LMI v28/v29 run: they carry vLLM PR #50040), 512 in / 256 out, best and median of 3.
COMMON=(--out-dir "$OUT" --work-dir "$WORK" --budget-s "$BUDGET_S" --reps 3 --output-len 256)
# tuned: the plan for the GPU present, the one its tune ran on (an H100's tuned files name the H100); H200 where no
# GPU answers (a dry run here)
if [ "$PHASE" != tuned ] || ! nvidia-smi -L >/dev/null 2>&1; then COMMON+=(--plan-gpu H200); fi
# ROUTING unset: the harness's own default (DEFAULT_ROUTING in benchmarks/e2e/routing.py), named in one place only
[ -n "${ROUTING:-}" ] && COMMON+=(--routing "$ROUTING")
[ -n "${PLAN_VLLM_VERSION:-}" ] && COMMON+=(--plan-vllm-version "$PLAN_VLLM_VERSION")
SERVED=(--backends plan,plan_vllm_kernel,auto,triton --conc 1,2,4,8,16,32,64 --long-conc 1)
case "$PHASE" in
  qwen)      # The image's baked Triton cache for this shape (BAKED_CACHE: one made elsewhere by the same command, at
             # the path it is read from here, as the image's aot stage makes it without a GPU), else baked now.
             bake qwen3-30b-a3b:tp1
             ARGS=(--models qwen3-30b-a3b-fp8-static "${SERVED[@]}" --warm-restart plan --start-breakdown plan
                   --baked-cache "$BAKED" --stream-check 64:512:256:3) ;;
  qwen-start)  # the plan's start only, from empty / warm / copied / baked caches; the bake runs here, with this
             # host's Triton (a cache baked elsewhere with another Triton build misses: docs/results/start-time.md)
             bake qwen3-30b-a3b:tp1
             # --layer-start: then `python -m entrypoint bake-cache` (what `make cache-layer` runs in the image) and a
             # start seeded from its layer, probed with every workload shape and seeded top-p batches (issue 14 item 3)
             # The engine is sized as the image ships it: max_num_seqs 64 (the image's serving.properties) and the
             # checkpoint's own max_model_len (40960), so CUDA graphs, compiled shapes and the warm-up's traffic are a
             # user's (the harness otherwise sizes to the run: 1 sequence of 784 tokens here)
             ARGS=(--models qwen3-30b-a3b-fp8-static --backends plan --conc 1 --reps 1 --long-input-len 0
                   --max-num-seqs 64 --max-model-len model --start-modes "${START_MODES:-warm,copied,baked}"
                   --warm-restart plan --start-breakdown plan --baked-cache "$BAKED" --layer-start
                   --start-pairs "${START_PAIRS:-1}") ;;
  qwen-plugin) # issue 15: the plan (our kernel at the dispatch table's M) against the plan without it, LMI-equivalent
             # and vLLM's own choice, at the concurrencies the issue names
             ARGS=(--models qwen3-30b-a3b-fp8-static --backends plan,plan_vllm_kernel,triton,auto --conc 1,2,4,8,64
                   --long-conc 1) ;;
  plugin-logits) ARGS=() ;;  # below: benchmarks.e2e.plugin_logits, not the harness
  engine-check) # issue 29: whether a new engine (vLLM 0.32) moved the baselines: the plan and LMI-equivalent (triton on
             # vLLM's tiles) at 1 and 64 with realistic routing (ROUTING). auto only when ENGINE_CHECK_BACKENDS names
             # it: its FlashInfer CUTLASS MoE module (fused_moe_90, 241 nvcc objects) is not in the image; without the
             # pruned .offline/moe90 upload (build_fused_moe_90.sh) it would JIT-compile at its first start. No bake:
             # each row's engine compiles its own kernels
             ARGS=(--models qwen3-30b-a3b-fp8-static --backends "${ENGINE_CHECK_BACKENDS:-plan,triton}"
                   --conc 1,64 --long-input-len 0) ;;
  routing)  # issue 31: the served plan against LMI-equivalent (triton on vLLM's tiles) under ROUTING, concurrency 1 to 128
             # (CONC) and the 4096-token row (LONG_CONC; 0: none), each row against its HBM floor, for one bundled model
             # (MODEL). ROUTING_BACKENDS: the rows (default plan,triton; plan,triton,auto with the moe90 upload, see
             # engine-check). Later engines read the first's Triton kernels: their starts are not cold ones
             ARGS=(--models "${MODEL:-qwen3-30b-a3b-fp8-static}" --backends "${ROUTING_BACKENDS:-plan,triton}"
                   --conc "${CONC:-1,2,4,8,16,32,64,128}" --share-triton-cache)
             if [ "${LONG_CONC:-1}" = 0 ]; then ARGS+=(--long-input-len 0); else ARGS+=(--long-conc "${LONG_CONC:-1}"); fi ;;
  routing-cost) # issue 31: what the routing simulator itself costs the engine, per model family (MODEL): the plan at one
             # request, where every routing touches top-k experts per layer, under dummy (the model's own router),
             # uniform_random and hot_experts, one run each in its own folder, 5 repetitions; a difference at 1 is the
             # strategy's own cost (the 4096-token row too). Later engines read the first's Triton kernels
             ARGS=(--models "${MODEL:-qwen3-30b-a3b-fp8-static}" --backends plan --conc 1 --long-conc 1 --reps 5
                   --share-triton-cache) ;;
  qwen-attention) # issue 15 item 5: the plan (our kernel included) with another attention backend, as a user sets it
             # (option.attention_backend, validated against vLLM's list like every engine option); the default (FA3
             # on the H200) is qwen-plugin's plan row of the same run. One harness run per backend in ATTN_BACKENDS
             # (default TRITON_ATTN; FLASHINFER without network first tries to download cubins, then JIT-compiles for
             # minutes: 225 s seen), each in its own folder under OUT, sharing the work dir and its FlashInfer JIT
             ARGS=(--models qwen3-30b-a3b-fp8-static --backends plan --conc 1,2,4,8,64 --long-conc 1) ;;
  nemotron)  ARGS=(--models nemotron-3-nano-30b-a3b-fp8 "${SERVED[@]}" --share-triton-cache) ;;
  profile)   # issue 33, step 1: where a decode step's time goes. The plan and the plan without our kernel, one repetition
             # at PROFILE_CONC (default 1,8) under ROUTING, then one batch per concurrency under vLLM's torch profiler
             # (--profile-conc: after the measured rows); traces per row under OUT/profiles/, summarised per step into
             # OUT/profile_steps.csv/.md by benchmarks.e2e.profile_trace. PROFILE_BACKENDS: the rows (default
             # plan,plan_vllm_kernel; `plan` alone fits ~200 s of a lease). PROFILE_REPS: profiled batches per
             # concurrency, one trace each (default 1; several where an engine's repetitions jitter, to compare a slow
             # batch's steps with a fast one's); PROFILE_ROW_REPS: the measured repetitions before them (default 1)
             ARGS=(--models "${MODEL:-qwen3-30b-a3b-fp8-static}" --backends "${PROFILE_BACKENDS:-plan,plan_vllm_kernel}"
                   --conc "${PROFILE_CONC:-1,8}" --long-input-len 0 --reps "${PROFILE_ROW_REPS:-1}"
                   --profile-conc "${PROFILE_CONC:-1,8}" --profile-reps "${PROFILE_REPS:-1}"
                   --share-triton-cache) ;;
  tuned)     # issue 32: a model the image never tuned (MODEL). `python -m entrypoint tune` on this GPU first (the step
             # `bake-cache` runs before its server; TUNE_BUDGET_S, its wall time in tune_MODEL.txt), into a layer folder;
             # then the plan reading that layer (MOE_BAKED_COMPILE_CACHE, as a start from a `make cache-layer` image
             # does) against LMI-equivalent (triton on vLLM's tiles), which is also the plan before tuning for such a
             # model: no tuned file, no dispatch row (`resolve` says so), at CONC under ROUTING
             # TUNED_BACKENDS: the rows (default plan,triton; add auto for vLLM's own choice, FlashInfer CUTLASS, which
             # needs the pruned fused_moe_90 upload). TUNED_LAYER_FROM: a folder of tuned files from an earlier tune
             # (a results folder's layers/MODEL), copied into the layer instead of tuning again
             ARGS=(--models "${MODEL:?tuned needs MODEL}" --backends "${TUNED_BACKENDS:-plan,triton}"
                   --conc "${CONC:-1,4,16,64}"
                   --long-input-len 0 --share-triton-cache) ;;
  nemotron-split) # issue 31, run 2026-12-04b: at 4 requests the plan was slower than LMI-equivalent in every repetition.
             # The plan, the plan without our kernel (our tiles, vLLM's kernel) and LMI-equivalent (vLLM's tiles) at 1
             # and 4 under ROUTING, 5 repetitions each: which of our kernel and our tiles moves TPOT there
             ARGS=(--models nemotron-3-nano-30b-a3b-fp8 --backends plan,plan_vllm_kernel,triton --conc 1,4
                   --long-input-len 0 --reps 5 --share-triton-cache) ;;
  nemotron-pin) # issue 31: Nemotron's jitter at one request, the host-thread hypothesis (docs/results/nemotron.md). The
             # plan at 1 and 4 requests, 5 repetitions, once as the OS places its processes and once with the API server,
             # the engine and the load generator each pinned to its own CPUs (PIN; default: whole physical cores, 1 for
             # the API server, 2 for the engine, 1 for the client, `python -m benchmarks.e2e.pinning`; --pin,
             # benchmarks/e2e/pinning.py: a labelled comparison row), each in its own folder; the host's CPU topology
             # (lscpu -e) beside them. If the pinned engine's spread collapses, the placement was the cause
             ARGS=(--models nemotron-3-nano-30b-a3b-fp8 --backends plan --conc 1,4 --long-input-len 0 --reps 5
                   --share-triton-cache) ;;
  nemotron-diag) # 2026-12-02: one Nemotron engine's repetitions spread 3-39 % (docs/results/nemotron.md). The plan with
             # prefix caching off (option.enable_prefix_caching=false: vLLM 0.26 then leaves the experimental Mamba
             # cache mode 'all'; 0.32 has 'none' off and 'align' on) and with it on (the image default), 5 reps each,
             # one run per variant in its own folder,
             # both with vLLM's CUDA-graph metrics logged (which graph mode each step ran: FULL, PIECEWISE or none)
             # and the whole engine log kept (engine_full.log.gz); run_queue.sh samples the GPU's clocks, the host's
             # CPU and a core's speed beside it. No 4096-token row: on 2026-12-03c the first variant's cold start (213
             # s) left it one repetition of its half of the budget
             # CONC: the concurrencies (default 1,8,64)
             ARGS=(--models nemotron-3-nano-30b-a3b-fp8 --backends plan --conc "${CONC:-1,8,64}" --long-input-len 0
                   --reps 5) ;;
  mixtral)   # LMI-equivalent (triton on vLLM's tiles) second: plan ÷ auto was measured in one run on 2026-12-02, the
             # LMI-equivalent engine was cut there, so a short step still returns plan ÷ LMI-equivalent from one run;
             # the table has no Mixtral row, so plan_vllm_kernel would be the plan's engine again
             ARGS=(--models mixtral-8x7b-fp8-static --backends plan,triton,auto --conc 1,2,4,8,16,32,64 --long-conc 1
                   --timeout mixtral-8x7b-fp8-static:auto=360
                   --share-triton-cache) ;;
  control)   ARGS=(--models qwen3-30b-a3b-fp8-block --backends auto,triton_tuned,plan,flashinfer_cutlass
                   --conc 1,8,16,64 --long-conc 1,8 --timeout qwen3-30b-a3b-fp8-block:flashinfer_cutlass=180) ;;
  fi-diag)   # the 420 s Mixtral start (docs/results/start-time.md): autotune ON with FlashInfer's per-tactic debug log; a second engine with
             # autotune OFF only if the first one timed out (set FI_DIAG_OFF=1 to force it).
             export FLASHINFER_LOGGING_LEVEL=debug
             ARGS=(--engine offline --compile none --models mixtral-8x7b-fp8-static --backends flashinfer_cutlass
                   --conc 1 --reps 1 --output-len 16
                   --long-input-len 0 --timeout mixtral-8x7b-fp8-static:flashinfer_cutlass=330) ;;
  all)       ARGS=(--models qwen3-30b-a3b-fp8-static,nemotron-3-nano-30b-a3b-fp8,mixtral-8x7b-fp8-static,qwen3-30b-a3b-fp8-block
                   --backends auto,triton,triton_tuned,plan,flashinfer_cutlass --conc 1,8,16,32,64
                   --warm-restart triton) ;;
  x8-*)      ARGS=() ;;  # below
  *) echo "e2e.sh: unknown phase '$PHASE'; accepted: prepare qwen qwen-start qwen-plugin qwen-attention plugin-logits engine-check routing" \
          "routing-cost" \
          "nemotron nemotron-split nemotron-diag nemotron-pin mixtral tuned profile" \
          "control fi-diag all x8-..." >&2
     exit 2 ;;
esac

# 8 x H200 (issue 16). Every phase: the plan (what `serve` runs) vs vLLM's own choice, one model or split per
# phase, in the order of benchmarks/device/queues/x8.txt. The image default tensor_parallel_degree=max gives TP8 on 8 GPUs;
# the TP4 phases say tensor_parallel_degree=4 (as a user on ml.p5e.48xlarge would) and run on 4 GPUs (the session
# runs the two side by side on GPUs 0-3 and 4-7). NCCL logs the NCCL_* settings it read (NCCL_DEBUG_SUBSYS=ENV:
# logging only) so every row shows them next to the planned ones.
if [[ $PHASE == x8-* ]]; then
  need=8
  [[ $PHASE == *-tp4 ]] && need=4
  have=$(visible_gpus)
  if ((have < need)); then
    echo "e2e.sh: phase $PHASE needs $need GPUs, this process sees $have" >&2
    exit 3
  fi
  export NCCL_DEBUG=${NCCL_DEBUG:-INFO} NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-ENV}
  X8=(--conc 1,8,64,128 --long-conc 1 --job-timeout-s "${JOB_TIMEOUT_S:-900}" --plan-num-gpus "$have")
  QWEN235=qwen3-235b-a22b-fp8-static
  case "$PHASE" in
    x8-qwen235-tp8)        # the block control rows are plan_error: vLLM refuses 1536/8 = 192 columns per GPU
                           ARGS=(--models "$QWEN235,qwen3-235b-a22b-fp8-block" --backends plan,auto "${X8[@]}") ;;
    x8-qwen235-tp8-start)  # cold (a short measured run: one rep, 32 tokens out) / warm / copied / baked starts;
                           # the baked one then probes every workload shape for JIT after start, per rank
                           bake qwen3-235b-a22b:tp8
                           ARGS=(--models "$QWEN235" --backends plan "${X8[@]}" --reps 1 --output-len 32
                                 --start-breakdown plan --baked-cache "$BAKED") ;;
    x8-deepseek-tp8ep8)    # plan = auto = FlashInfer CUTLASS on block FP8 under EP, which the offline bundle's pruned
                           # fused_moe_90 cannot load (seen 2026-11-30 on the block control): triton first, so EP
                           # through the resolver's argv is measured whatever the plan row does
                           ARGS=(--models deepseek-v3-fp8-block --backends triton,plan,auto "${X8[@]}"
                                 --option enable_expert_parallel=true) ;;
    x8-deepseek-tp8)       ARGS=(--models deepseek-v3-fp8-block --backends plan,auto "${X8[@]}") ;;
    x8-qwen235-tp4)        ARGS=(--models "$QWEN235,qwen3-235b-a22b-fp8-block" --backends plan,auto "${X8[@]}"
                                 --option tensor_parallel_degree=4) ;;
    x8-mixtral8x22-tp4)    ARGS=(--models mixtral-8x22b-fp8-static --backends plan,auto "${X8[@]}"
                                 --option tensor_parallel_degree=4) ;;
    x8-maverick-tp8)       # plan = auto (CUTLASS for channel x token): triton_tuned reads our TP8 tiles
                           ARGS=(--models llama-4-maverick-fp8 --backends plan,auto,triton_tuned "${X8[@]}") ;;
    x8-qwen235-block-tp8ep8) # as x8-deepseek-tp8ep8: triton first, the plan (FlashInfer CUTLASS block) after
                           ARGS=(--models qwen3-235b-a22b-fp8-block --backends triton,plan,auto "${X8[@]}"
                                 --option enable_expert_parallel=true) ;;
    *) echo "e2e.sh: unknown phase '$PHASE'" >&2; exit 2 ;;
  esac
fi

LOG="$OUT/e2e_console.log"
if [ "$PHASE" = plugin-logits ]; then
  # the served plan with and without our kernel on one random FP8 checkpoint (4 layers; dummy weights are all 0 in
  # FP8): logprobs of the first decode steps, greedy agreement over 256 tokens (benchmarks/e2e/plugin_logits.py);
  # `make test-gpu` runs the same with a bound (tests/entrypoint/moe_plugin/test_plugin_engine_gpu.py)
  [ "${DRY_RUN:-0}" = 1 ] && { echo "e2e.sh: plugin-logits (dry run)"; exit 0; }
  python3 -m benchmarks.e2e.plugin_logits --model qwen3-30b-a3b-fp8-static --random-layers 4 --out-dir "$OUT" \
    --work-dir "$WORK" 2>&1 | tee "$LOG"
  exit "${PIPESTATUS[0]}"
fi
if [ "${DRY_RUN:-0}" = 1 ]; then : >"$LOG"
else nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader 2>&1 | tee "$LOG"
fi
if [ "$PHASE" = tuned ] && [ "${DRY_RUN:-0}" != 1 ]; then
  LAYER=$WORK/layer-$MODEL
  if [ -n "${TUNED_LAYER_FROM:-}" ]; then
    rm -rf "$LAYER" && mkdir -p "$LAYER/tuned" && cp "$TUNED_LAYER_FROM"/*.json "$LAYER/tuned/" 2>/dev/null
    echo "tuned files from $TUNED_LAYER_FROM (no tune in this run)" | tee "$OUT/tune_$MODEL.txt"
  else
    t0=$SECONDS
    # planned for the GPU it runs on (NVML), as `bake-cache` on a user's host: its files carry this GPU's name
    python3 -m entrypoint tune --model "$HERE/benchmarks/e2e/models/$MODEL" --out "$LAYER" \
      --tune-budget-s "${TUNE_BUDGET_S:-300}" 2>"$OUT/tune_$MODEL.log" | tee "$OUT/tune_$MODEL.txt"
    tune_rc=${PIPESTATUS[0]}
    echo "tune wall: $((SECONDS - t0)) s (budget ${TUNE_BUDGET_S:-300} s)" | tee -a "$OUT/tune_$MODEL.txt"
    tail -n 5 "$OUT/tune_$MODEL.log"
    # 2026-12-06e: the tune failed and the step went on to compare the plan without its row against triton
    if ((tune_rc != 0)); then
      echo "e2e.sh: the tune exited $tune_rc (tune_$MODEL.log); no engine started: the plan would lack its layer" >&2
      exit 1
    fi
  fi
  # a tune that skipped (its one reason line is in tune_MODEL.txt) or a folder without tiles leaves nothing to compare
  if ! compgen -G "$LAYER/tuned/E=*.json" >/dev/null; then
    echo "e2e.sh: no tile file under $LAYER/tuned (tune_$MODEL.txt says why); no engine started" >&2
    exit 1
  fi
  cp "$LAYER"/tuned/*.json "$OUT/" 2>/dev/null
  export MOE_BAKED_COMPILE_CACHE=$LAYER
fi
# A dry run skips the tune but plans the harness with what the tune may leave of the step: its budget, which starts
# once the tune's plan is known (entrypoint/caches/tune_layer.py), and ~30 s of imports and planning before it
if [ "$PHASE" = tuned ] && [ "${DRY_RUN:-0}" = 1 ] && [ -z "${TUNED_LAYER_FROM:-}" ]; then
  PLANNED_S=$((PLANNED_S + ${TUNE_BUDGET_S:-300} + 30))
fi
# Phases of one harness run per variant (NAME=OPTION[;OPTION...], or NAME= for the image default), each in its own
# folder under OUT, sharing the work dir and its FlashInfer JIT; the budget left is split over the runs still to start.
VARIANTS=()
if [ "$PHASE" = qwen-attention ]; then
  read -ra ATTN <<<"${ATTN_BACKENDS-TRITON_ATTN}"
  if ((${#ATTN[@]} == 0)); then
    echo "e2e.sh: ATTN_BACKENDS is empty; give vLLM attention backend names, e.g. TRITON_ATTN" >&2
    exit 2
  fi
  for backend in "${ATTN[@]}"; do VARIANTS+=("$backend=attention_backend=$backend"); done
elif [ "$PHASE" = nemotron-diag ]; then
  VARIANTS=("no-prefix-caching=enable_prefix_caching=false;cudagraph_metrics=true"
            "prefix-caching=cudagraph_metrics=true")
elif [ "$PHASE" = nemotron-pin ]; then  # "pin=X" is the harness's --pin, not an LMI option
  # default: whole physical cores per role (SMT siblings together), from this host's topology
  PIN=${PIN:-$(python3 -m benchmarks.e2e.pinning)} || exit 2
  VARIANTS=("unpinned=" "pinned=pin=$PIN")
  lscpu -e >"$OUT/lscpu.txt" 2>&1 || true
elif [ "$PHASE" = routing-cost ]; then  # "routing=X" is the harness's --routing, not an LMI option
  for routing in ${ROUTINGS:-uniform_one_launch dummy}; do VARIANTS+=("$routing=routing=$routing"); done
fi
if ((${#VARIANTS[@]} > 0)); then
  WARM_PREPARE_S=20  # the work dir's preparation when the queue's `prepare` came first (a dry run counts this)
  # The harness's own need for one run's first engine, preparation included (its dry run's verdict line,
  # runner.first_engine_verdict). 2026-12-06d: routing-cost on Nemotron by hand with BUDGET_S=555 gave its first
  # routing 273 s of the ~288 s it needed; that run skipped its engine and the second measured without a reference.
  need=$(python3 -m benchmarks.e2e run "${COMMON[@]}" "${ARGS[@]}" --dry-run 2>/dev/null |
    sed -n 's/^e2e: first engine: needs ~\([0-9]*\) s .*/\1/p' | head -1)
  min_share=${MIN_VARIANT_S:-260}
  [ -n "$need" ] && ((need > min_share)) && min_share=$need
  left=$((BUDGET_S - $(spent_s) - WARM_PREPARE_S))
  if ((left < ${#VARIANTS[@]} * min_share)); then
    echo "e2e.sh: phase $PHASE compares ${#VARIANTS[@]} runs (${VARIANTS[*]%%=*}); each needs ~${min_share} s for" \
      "its first engine, ${#VARIANTS[@]} x ${min_share} s in all, and BUDGET_S=$BUDGET_S leaves ~${left} s: raise" \
      "BUDGET_S, or compare fewer (ROUTINGS, ATTN_BACKENDS)" >&2
    exit 2
  fi
  # made before the budget is shared, so no variant's share pays for it; a dry run counts a warm work dir (the queue's
  # `prepare` step came first: tests/benchmarks/test_queue_budgets.py)
  if [ "${DRY_RUN:-0}" = 1 ]; then
    PLANNED_S=$((PLANNED_S + WARM_PREPARE_S))
  else
    # bounded so that one variant's run still fits (a cold work dir, the queue's prepare skipped: the engine then
    # builds what the prepare did not)
    prepare_s=$((BUDGET_S - $(spent_s) - ${MIN_VARIANT_S:-260}))
    ((prepare_s > 300)) && prepare_s=300
    ((prepare_s < 60)) && prepare_s=60
    python3 -m benchmarks.e2e prepare --work-dir "$WORK" --timeout-s "$prepare_s" 2>&1 | tee -a "$LOG"
  fi
  rc=0 runs_left=${#VARIANTS[@]}
  for variant in "${VARIANTS[@]}"; do
    name=${variant%%=*} option=${variant#*=}
    # an even share, but never less than one engine's run (MIN_VARIANT_S): on 2026-12-05 three routings shared 450 s
    # and the first two, at 150 s each, skipped their only engine (~230 s with the run's preparation)
    left=$((BUDGET_S - $(spent_s)))
    share=$((left / runs_left))
    ((share < min_share)) && share=$((left < min_share ? left : min_share))
    ((share < 0)) && share=0  # nothing left: the harness writes its rows as skipped_budget
    runs_left=$((runs_left - 1))
    extra=()
    if [[ $option == pin=* ]]; then
      extra+=(--pin "${option#pin=}")  # the whole value: its roles are ';'-separated too
    else
      IFS=';' read -ra options <<<"$option"
      for one in "${options[@]}"; do
        if [[ $one == routing=* ]]; then extra+=(--routing "${one#routing=}"); else extra+=(--option "$one"); fi
      done
    fi
    mkdir -p "$OUT/$name"
    python3 -m benchmarks.e2e run "${COMMON[@]}" --out-dir "$OUT/$name" --budget-s "$share" "${ARGS[@]}" \
      "${extra[@]}" "${DRY[@]}" 2>&1 | tee -a "$LOG"
    ((PIPESTATUS[0] == 0)) || rc=1
    PLANNED_S=$((PLANNED_S + share))  # a dry run plans the next variant with this one's whole share spent
    if [ "$PHASE" = nemotron-diag ]; then  # the worker's log holds the whole server log (its CUDA-graph metrics)
      gzip -c "$WORK/nemotron-3-nano-30b-a3b-fp8.plan.cold.log" >"$OUT/$name/engine_full.log.gz" 2>/dev/null || true
    fi
  done
  echo "e2e.sh: phase $PHASE finished rc=$rc; one folder per variant in $OUT: ${VARIANTS[*]%%=*}"
  exit "$rc"
fi
# what the step has left (the tuned phase's tune came first): the harness counts its budget from its own start
python3 -m benchmarks.e2e run "${COMMON[@]}" "${ARGS[@]}" --budget-s "$((BUDGET_S - $(spent_s)))" "${DRY[@]}" 2>&1 \
  | tee -a "$LOG"
rc=${PIPESTATUS[0]}
if [ "$PHASE" = profile ] && [ "${DRY_RUN:-0}" != 1 ]; then
  traces=() labels=()
  for trace in "$OUT"/profiles/*/conc*/*rank0*.pt.trace.json*; do
    [ -e "$trace" ] || continue
    row=$(basename "$(dirname "$(dirname "$trace")")") conc=$(basename "$(dirname "$trace")")
    traces+=("$trace") labels+=(--label "$row $conc")
  done
  if ((${#traces[@]})); then
    python3 -m benchmarks.e2e.profile_trace "${traces[@]}" "${labels[@]}" --out-csv "$OUT/profile_steps.csv" \
      --out-md "$OUT/profile_steps.md" --out-names-csv "$OUT/profile_kernels.csv" \
      --out-timeline-csv "$OUT/profile_timeline.csv" 2>&1 | tee -a "$LOG"
  else
    echo "e2e.sh: profile: no rank-0 trace under $OUT/profiles" | tee -a "$LOG"
  fi
  # The raw traces stay on the host: a file coming back from a lease is at most 16 MiB and run_queue.sh returns a
  # queue as one tarball, which several rows' traces would overflow (losing the CSVs with it). The summary travels.
  kept=$WORK/profiles-kept/$(date +%s)
  mkdir -p "$kept" && mv "$OUT/profiles" "$kept/" && echo "e2e.sh: raw traces moved to $kept" | tee -a "$LOG"
  # except the smallest one-request trace, when small enough, so a summary that fails on a real trace can be debugged
  smallest=$(find "$kept" -path '*/conc1*/*rank0*.pt.trace.json*' -size -6M -printf '%s %p\n' | sort -n | head -n 1)
  if [ -n "$smallest" ]; then cp "${smallest#* }" "$OUT/"; fi
fi
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
