"""The arguments of ``python -m benchmarks.e2e run``: the parser, its checks, and the frozen RunArgs every later
step reads (jobs, one_engine, start_experiments, run). Imports nothing of those, so they can all import it."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.e2e import backends as be
from benchmarks.e2e import options as bench_opts
from benchmarks.e2e import pinning, profile_capture, routing, spec
from benchmarks.paths import E2E_RESULTS

DEFAULT_SNAPSHOT = E2E_RESULTS / "plans.json"
# Rows known to risk a long hang get a short leash of their own (see benchmarks/e2e/README.md): Mixtral-8x7B FP8
# static on FlashInfer CUTLASS (auto picks it too) did not start within 420 s on the offline build.
DEFAULT_TIMEOUTS = {
    "mixtral-8x7b-fp8-static:flashinfer_cutlass": 300.0,
    "mixtral-8x7b-fp8-static:auto": 300.0,
}


START_MODES = ("warm", "copied", "baked")
# warm-spawn: the warm caches with the image's start method before 2026-12-03 (spawn, which re-imports vLLM in
# EngineCore: 22-25 s of a warm start) instead of its fork (runner.IMAGE_START_METHOD); a comparison row, not in the
# default set, it runs only when --start-modes names it (2026-12-03 measured the other way round: warm-fork 0.71x warm)
STARTS_ACCEPTED = ("warm", "warm-spawn", "copied", "baked")


@dataclass(frozen=True)
class PlanTarget:
    """What the rows' plan is made for: the GPUs and vLLM to plan for (None: detect, as `serve` does), and the
    resolver's snapshot the offline engine reads where the resolver cannot be imported."""

    snapshot: Path = DEFAULT_SNAPSHOT
    gpu: str | None = None  # --plan-gpu: gpu= for build_plan
    num_gpus: int | None = None  # --plan-num-gpus (with --plan-gpu: plan 8 GPUs on a machine without)
    vllm_version: str | None = None  # --plan-vllm-version (default: the installed vLLM)


@dataclass(frozen=True)
class StartExperiments:
    """The starts timed after a row's cold one (--start-breakdown and its companions; start_experiments.py)."""

    backends: tuple[str, ...] = ()  # whose start is also measured warm, copied and baked
    modes: tuple[str, ...] = START_MODES  # --start-modes: which restarts follow the cold one
    baked_cache: Path | None = None  # a `kernels.aot bake` output: the image's baked Triton cache
    layer_start: bool = False  # the plan's breakdown also bakes a compile-cache layer and starts from it
    pairs: int = 0  # --start-pairs: then this many more (warm, layer) starts, alternating, for their spread


@dataclass(frozen=True)
class RunArgs:
    models: tuple[str, ...]
    backends: tuple[str, ...]
    workloads: tuple[spec.Workload, ...]
    reps: int
    budget_s: float
    job_timeout_s: float
    timeouts: dict[str, float]
    warm_restart: tuple[str, ...]
    layers: int | None
    compile_mode: str
    gpu_memory_utilization: float
    max_num_seqs: int
    engine_args: dict[str, Any]
    out_dir: Path
    work_dir: Path
    dry_run: bool
    plan: PlanTarget = PlanTarget()
    starts: StartExperiments = StartExperiments()
    engine: str = "served"  # served: the real server from the plan (what ships); offline: vllm.LLM (old rows)
    stream_check: dict[str, int] | None = None  # conc, input_len, output_len, reps (plan backend only)
    profile_conc: tuple[int, ...] = ()  # --profile-conc: one profiled batch per concurrency after each row's reps
    profile_tokens: int = 32
    profile_reps: int = 1  # --profile-reps: profiled batches per concurrency (an engine whose repetitions jitter)
    share_triton_cache: bool = False  # later engines read the Triton kernels earlier ones compiled (phase_cache)
    options: dict[str, str] = field(default_factory=dict)  # --option: LMI options of every served row
    # --max-model-len: "workload" (the longest request + 16), "model" (not set: the checkpoint's own, as the image
    # serves it) or a number
    model_len: str = "workload"
    # --routing: where the tokens go (benchmarks/e2e/routing.py); every engine of the run, recorded in every row
    routing: str = routing.DEFAULT_ROUTING
    # --pin: the API server, the engine processes and the load generator on chosen CPUs (served engine; a harness
    # setting, in every row's `pinning` column); empty: the OS places them, as in production
    pin: str = ""
    hbm_read_tbps: float = 0.0  # --hbm-read-tbps: the floor's bandwidth; 0: measured on the GPU at the run's start
    # set by the run: the variable through which each served start seeds the run's baked model-info entries
    model_info_env: dict[str, str] = field(default_factory=dict)


def _timeout_arg(text: str) -> tuple[str, float]:
    key, sep, value = text.partition("=")
    if not sep or ":" not in key:
        raise argparse.ArgumentTypeError(f"--timeout {text!r}: expected MODEL:BACKEND=SECONDS")
    try:
        return key, float(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--timeout {text!r}: SECONDS must be a number") from exc


def _engine_arg(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--engine-arg {text!r}: expected KEY=JSON, e.g. enforce_eager=true")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value  # a bare string


def run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.e2e run", description=__doc__)
    p.add_argument("--models", default=spec.BUNDLED_MODELS[0], help="comma list of bundled names or dirs")
    p.add_argument("--backends", default="auto,triton,triton_tuned,plan", help=", ".join(be.BACKENDS))
    p.add_argument("--conc", default="1,8,16,64", help="concurrent requests, comma list")
    p.add_argument("--input-len", type=int, default=512)
    p.add_argument("--output-len", type=int, default=256)
    p.add_argument("--long-input-len", type=int, default=4096, help="long-context row; 0 disables it")
    p.add_argument("--long-conc", default="1,8", help="concurrencies of the long-context row")
    p.add_argument("--reps", type=int, default=3, help="repetitions per point (best and median reported)")
    p.add_argument("--budget-s", type=float, default=540.0, help="stop cleanly and write results by then")
    p.add_argument("--job-timeout-s", type=float, default=420.0, help="per engine subprocess")
    p.add_argument("--timeout", type=_timeout_arg, action="append", default=[], help="MODEL:BACKEND=SECONDS")
    p.add_argument("--warm-restart", default="", help="backends whose warm-cache restart is timed, or 'all'")
    p.add_argument("--layers", type=int, default=None, help="fewer decoder layers, only if memory forbids")
    p.add_argument("--engine", choices=("served", "offline"), default="served",
                   help="served (default): `python -m entrypoint serve`'s own argv and env, measured over HTTP; "
                        "offline: vllm.LLM in-process (how the rows before 2026-12 were measured)")  # fmt: skip
    p.add_argument("--compile", dest="compile_mode", choices=("default", "none", "eager"), default="default",
                   help="default: vLLM's own (torch.compile + CUDA graphs: what `serve` runs); none: "
                        "no torch.compile, decode-only CUDA graphs (a comparison row, NOT what ships); "
                        "eager: offline only")  # fmt: skip
    p.add_argument("--stream-check", default="", metavar="CONC:IN:OUT:REPS",
                   help="on the plan engine: LMI jsonlines vs OpenAI SSE on /invocations vs /v1/completions, "
                        "e.g. 64:512:256:3 (served engine only)")  # fmt: skip
    p.add_argument("--profile-conc", default="", metavar="C1,C2",
                   help="after each served row's repetitions, one batch per concurrency under vLLM's torch profiler "
                        "(traces to OUT/profiles/; benchmarks/e2e/profile_capture.py), e.g. 1,8")  # fmt: skip
    p.add_argument("--profile-tokens", type=int, default=32, help="output tokens of a profiled batch (default 32)")
    p.add_argument("--profile-reps", type=int, default=1,
                   help="profiled batches per concurrency, each its own trace (default 1; more where one engine's "
                        "repetitions differ, to compare a slow batch's steps with a fast one's)")  # fmt: skip
    p.add_argument("--start-breakdown", default="", help="backends whose start is also timed warm, from copied "
                   "caches and from --baked-cache (served engine only), e.g. plan")  # fmt: skip
    p.add_argument("--start-modes", default=",".join(START_MODES),
                   help="restarts after the cold one, a subset of " + ",".join(STARTS_ACCEPTED))  # fmt: skip
    p.add_argument("--baked-cache", type=Path, default=None, help="a `python -m kernels.aot bake` cache folder")
    p.add_argument("--share-triton-cache", action="store_true",
                   help="each engine after the first reads the Triton kernels the run's earlier engines compiled, "
                        "as the image reads its baked cache (benchmarks/e2e/phase_cache.py): shorter starts, the "
                        "same kernels; each row's start_caches column says what its start had")  # fmt: skip
    p.add_argument("--layer-start", action="store_true",
                   help="the plan's start breakdown also runs `python -m entrypoint bake-cache` and starts from that "
                        "layer (make cache-layer's image), counting compiles at start and while probed")  # fmt: skip
    p.add_argument("--start-pairs", type=int, default=0, metavar="N",
                   help="with --layer-start: then N more pairs of a warm start and a start from the same layer, "
                        "alternating, so the layer ÷ warm ratio comes with the spread of one machine's starts (rows "
                        "'warm 2', 'layer 2', ...)")  # fmt: skip
    p.add_argument("--pin", default="", metavar="api=CPUS;engine=CPUS;client=CPUS",
                   help="served engine only: pin the API server, the engine processes under it and the load generator "
                        "to these CPUs once the server answers (benchmarks/e2e/pinning.py); a labelled comparison "
                        "row, never what serve does")  # fmt: skip
    p.add_argument("--routing", default=routing.DEFAULT_ROUTING, metavar="|".join(routing.ROUTINGS),
                   help="expert routing of every engine (benchmarks/e2e/routing.py): uniform_one_launch (default: "
                        "uniform, one kernel per layer), uniform_random (the same through vLLM's simulator), "
                        "hot_experts (skewed) or dummy (the dummy weights' collapsed routing: a labelled "
                        "control, its rows at concurrency >= 2 are never published)")  # fmt: skip
    p.add_argument("--hbm-read-tbps", type=float, default=0.0,
                   help="HBM read bandwidth for each row's floor check (benchmarks/e2e/hbm_floor.py); default 0: "
                        "measured on the run's GPU before the first engine")  # fmt: skip
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--max-num-seqs", type=int, default=0, help="default: the largest concurrency")
    p.add_argument("--max-model-len", default="workload", metavar="workload|model|N",
                   help="workload (default): the longest request + 16; model: not set, the checkpoint's own as the "
                        "image serves it (served engine only: a start measured as it ships); N: that many")  # fmt: skip
    p.add_argument("--engine-arg", type=_engine_arg, action="append", default=[],
                   help="KEY=JSON for LLM() (offline engine only; the served engine takes --option)")  # fmt: skip
    p.add_argument("--option", type=bench_opts.parse_option, action="append", default=[], metavar="KEY=VALUE",
                   help="an LMI option for every served row, as OPTION_<KEY> (e.g. tensor_parallel_degree=4, "
                        "enable_expert_parallel=true); recorded in each row's `options` column")  # fmt: skip
    p.add_argument("--out-dir", type=Path, default=E2E_RESULTS)
    p.add_argument("--work-dir", type=Path, default=Path("/tmp/e2e-bench-work"))
    p.add_argument("--plan-snapshot", type=Path, default=DEFAULT_SNAPSHOT)
    p.add_argument("--plan-gpu", default=None, help="gpu= for build_plan; default: detect")
    p.add_argument("--plan-num-gpus", type=int, default=None,
                   help="num_gpus= for build_plan, with --plan-gpu (e.g. 8: the image default "
                        "tensor_parallel_degree=max then plans TP8, on a machine with or without GPUs)")  # fmt: skip
    p.add_argument("--plan-vllm-version", default=None,
                   help="vllm_version= for build_plan (default: the installed vLLM; 0.26.0 reviews a GPU host's "
                        "plans on a machine with another vLLM)")  # fmt: skip
    p.add_argument("--dry-run", action="store_true",
                   help="print the jobs, the estimate and (served engine) each row's server argv and environment; "
                        "run nothing")  # fmt: skip
    return p


def _check_model_len(text: str, longest: int, engine: str) -> None:
    if text == "workload":
        return
    if text == "model":
        if engine != "served":
            raise ValueError("--max-model-len model: needs --engine served (the offline engine is sized by the run)")
        return
    if not text.isdigit() or int(text) <= longest:
        raise ValueError(f"--max-model-len: {text!r}; accepted: workload, model or a number above the longest "
                         f"request ({longest} tokens)")  # fmt: skip


def parse_run_args(argv: Sequence[str]) -> RunArgs:
    parser = run_parser()
    ns = parser.parse_args(argv)
    try:
        conc = spec.parse_int_list(ns.conc, "--conc")
        long_conc = spec.parse_int_list(ns.long_conc, "--long-conc") if ns.long_input_len > 0 else ()
        backends = be.parse_backends(ns.backends)
        models = tuple(m.strip() for m in ns.models.split(",") if m.strip())
        for m in models:
            spec.resolve_model_dir(m)
        for name, value in (("--input-len", ns.input_len), ("--output-len", ns.output_len), ("--reps", ns.reps)):
            if value <= 0:
                raise ValueError(f"{name}: {value} must be > 0")
        if ns.output_len < 2:
            raise ValueError(f"--output-len: {ns.output_len} must be >= 2 (TPOT needs two tokens)")
        if ns.layers is not None and ns.layers <= 0:
            raise ValueError(f"--layers: {ns.layers} must be > 0")
        if ns.start_pairs < 0 or (ns.start_pairs and not ns.layer_start):
            raise ValueError(f"--start-pairs: {ns.start_pairs}; accepted: 0, or N > 0 together with --layer-start")
        warm = be.BACKENDS if ns.warm_restart == "all" else tuple(
            b.strip() for b in ns.warm_restart.split(",") if b.strip()
        )  # fmt: skip
        unknown = [b for b in warm if b not in be.BACKENDS]
        if unknown:
            raise ValueError(f"--warm-restart: unknown {unknown}; accepted: {', '.join(be.BACKENDS)} or all")
        max_conc = max((*conc, *long_conc))
        breakdown = tuple(b.strip() for b in ns.start_breakdown.split(",") if b.strip())
        if [b for b in breakdown if b not in be.BACKENDS]:
            raise ValueError(f"--start-breakdown: {ns.start_breakdown!r}; accepted: {', '.join(be.BACKENDS)}")
        stream_check = parse_stream_check(ns.stream_check) if ns.stream_check else None
        start_modes = tuple(m.strip() for m in ns.start_modes.split(",") if m.strip())
        if [m for m in start_modes if m not in STARTS_ACCEPTED]:
            raise ValueError(f"--start-modes: {ns.start_modes!r}; accepted: a subset of {','.join(STARTS_ACCEPTED)}")
        if ns.engine == "served" and ns.compile_mode == "eager":
            raise ValueError("--compile eager: the served engine takes default or none")
        if ns.share_triton_cache and (breakdown or ns.engine == "offline"):
            raise ValueError("--share-triton-cache: needs --engine served and no --start-breakdown (the breakdown's "
                             "'empty' start must start from empty caches)")  # fmt: skip
        if ns.engine == "offline" and (breakdown or stream_check):
            raise ValueError("--start-breakdown and --stream-check need --engine served")
        routing.check_routing(ns.routing)
        pin = pinning.format_pin(pinning.parse_pin(ns.pin)) if ns.pin else ""
        if pin and ns.engine != "served":
            raise ValueError("--pin pins the served engine's processes: it needs --engine served")
        if ns.hbm_read_tbps < 0:
            raise ValueError(f"--hbm-read-tbps: {ns.hbm_read_tbps}; accepted: 0 (measure) or a bandwidth in TB/s")
        workloads = spec.build_workloads(conc, ns.input_len, ns.output_len, ns.long_input_len, long_conc)
        _check_model_len(ns.max_model_len, max(w.input_len + w.output_len for w in workloads), ns.engine)
        if ns.max_num_seqs and ns.max_num_seqs < max_conc:
            raise ValueError(f"--max-num-seqs: {ns.max_num_seqs} is below the largest concurrency {max_conc}")
        options = bench_opts.collect(ns.option)
        profile_conc = spec.parse_int_list(ns.profile_conc, "--profile-conc") if ns.profile_conc else ()
        if profile_conc and ns.engine != "served":
            raise ValueError("--profile-conc profiles the served engine: it needs --engine served")
        if ns.profile_reps < 1:
            raise ValueError(f"--profile-reps: {ns.profile_reps}; accepted: 1 or more")
        if profile_conc:  # every served row can then be profiled; the profiler only runs between start and stop
            options["profiler_config"] = profile_capture.profiler_option(profile_capture.trace_dir(ns.work_dir))
        if ns.engine == "offline" and options:
            raise ValueError("--option needs --engine served (the offline engine takes --engine-arg)")
        if ns.engine == "served" and ns.engine_arg:
            raise ValueError("--engine-arg sets LLM() arguments of the offline engine; the served engine runs what "
                             "`serve` runs: give LMI options with --option KEY=VALUE")  # fmt: skip
        if ns.plan_num_gpus is not None and (ns.plan_num_gpus < 1 or not ns.plan_gpu):
            raise ValueError(f"--plan-num-gpus {ns.plan_num_gpus}: needs --plan-gpu (a simulated GPU, e.g. H200) "
                             "and a count of at least 1; without --plan-gpu the GPUs are detected")  # fmt: skip
    except ValueError as exc:
        parser.error(str(exc))
    return RunArgs(
        models=models,
        backends=backends,
        workloads=workloads,
        reps=ns.reps,
        budget_s=ns.budget_s,
        job_timeout_s=ns.job_timeout_s,
        timeouts={**DEFAULT_TIMEOUTS, **dict(ns.timeout)},
        warm_restart=warm,
        layers=ns.layers,
        compile_mode=ns.compile_mode,
        gpu_memory_utilization=ns.gpu_memory_utilization,
        max_num_seqs=ns.max_num_seqs or max_conc,
        engine_args=dict(ns.engine_arg),
        out_dir=ns.out_dir,
        work_dir=ns.work_dir,
        plan=PlanTarget(ns.plan_snapshot, ns.plan_gpu, ns.plan_num_gpus, ns.plan_vllm_version),
        dry_run=ns.dry_run,
        engine=ns.engine,
        stream_check=stream_check,
        profile_conc=profile_conc,
        profile_tokens=ns.profile_tokens,
        profile_reps=ns.profile_reps,
        starts=StartExperiments(breakdown, start_modes, ns.baked_cache, ns.layer_start, ns.start_pairs),
        share_triton_cache=ns.share_triton_cache,
        options=options,
        model_len=ns.max_model_len,
        routing=ns.routing,
        pin=pin,
        hbm_read_tbps=ns.hbm_read_tbps,
    )


def parse_stream_check(text: str) -> dict[str, int]:
    parts = text.split(":")
    if len(parts) != 4 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"--stream-check {text!r}: expected CONC:IN:OUT:REPS, positive integers (e.g. 64:512:256:3)")
    return dict(zip(("conc", "input_len", "output_len", "reps"), map(int, parts), strict=True))


def job_timeout(args: RunArgs, model: str, backend: str) -> float:
    return args.timeouts.get(f"{model}:{backend}", args.job_timeout_s)
