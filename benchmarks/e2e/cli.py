"""Command line: ``python -m benchmarks.e2e [run] --models ... --backends ... --conc 1,8,64``.

Subcommands: ``run`` (default) measures; ``estimate`` prints the jobs and the expected time and exits;
``report --csv FILE [--merge RUN.csv ...]`` redraws the markdown table and the PNG from a CSV (e.g. one fetched
from the H200), first combining a session's runs into it with ``--merge``;
``plans`` writes the resolver's decisions for the bundled models to a snapshot, for GPU hosts where the
resolver's own dependencies are not installed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks.e2e import backends as be
from benchmarks.e2e import options as bench_opts
from benchmarks.e2e import parallel, report, runner, served, spec, tokenizer
from benchmarks.e2e.jitcount import moe_kernels_by_rank
from benchmarks.e2e.jobs import (
    PlannedJob,
    engine_cache,
    max_model_len,
    multicast_refusals,
    plan_jobs,
    print_commands,
    print_estimate,
    served_options,
)
from benchmarks.e2e.logparse import condense
from benchmarks.e2e.phase_cache import EMPTY, PhaseTritonCache
from benchmarks.paths import E2E_RESULTS
from benchmarks.sigterm import exit_on_sigterm
from tools.local_server import free_port

DEFAULT_SNAPSHOT = E2E_RESULTS / "plans.json"
SERVED_WORKER = "benchmarks.e2e.served_worker"
# Rows known to risk a long hang get a short leash of their own (see docs/e2e-bench.md): Mixtral-8x7B FP8
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
    plan_snapshot: Path
    plan_gpu: str | None
    dry_run: bool
    engine: str = "served"  # served: the real server from the plan (what ships); offline: vllm.LLM (old rows)
    stream_check: dict[str, int] | None = None  # conc, input_len, output_len, reps (plan backend only)
    start_breakdown: tuple[str, ...] = ()  # backends whose start is also measured warm, copied and baked
    baked_cache: Path | None = None  # a `kernels.aot bake` output: the image's baked Triton cache
    layer_start: bool = False  # the start breakdown also bakes a compile-cache layer and starts from it
    start_pairs: int = 0  # --start-pairs: then this many more (warm, layer) starts, alternating, for their spread
    share_triton_cache: bool = False  # later engines read the Triton kernels earlier ones compiled (phase_cache)
    options: dict[str, str] = field(default_factory=dict)  # --option: LMI options of every served row
    plan_num_gpus: int | None = None  # num_gpus= for build_plan (with --plan-gpu: plan 8 GPUs on a machine without)
    plan_vllm_version: str | None = None  # vllm_version= for build_plan (default: the installed vLLM)
    # --max-model-len: "workload" (the longest request + 16), "model" (not set: the checkpoint's own, as the image
    # serves it) or a number
    model_len: str = "workload"
    start_modes: tuple[str, ...] = START_MODES  # --start-modes: which restarts the breakdown times after the cold one
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
        workloads = spec.build_workloads(conc, ns.input_len, ns.output_len, ns.long_input_len, long_conc)
        _check_model_len(ns.max_model_len, max(w.input_len + w.output_len for w in workloads), ns.engine)
        if ns.max_num_seqs and ns.max_num_seqs < max_conc:
            raise ValueError(f"--max-num-seqs: {ns.max_num_seqs} is below the largest concurrency {max_conc}")
        options = bench_opts.collect(ns.option)
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
        plan_snapshot=ns.plan_snapshot,
        plan_gpu=ns.plan_gpu,
        dry_run=ns.dry_run,
        engine=ns.engine,
        stream_check=stream_check,
        start_breakdown=breakdown,
        baked_cache=ns.baked_cache,
        layer_start=ns.layer_start,
        start_pairs=ns.start_pairs,
        share_triton_cache=ns.share_triton_cache,
        options=options,
        plan_num_gpus=ns.plan_num_gpus,
        plan_vllm_version=ns.plan_vllm_version,
        model_len=ns.max_model_len,
        start_modes=start_modes,
    )


def parse_stream_check(text: str) -> dict[str, int]:
    parts = text.split(":")
    if len(parts) != 4 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"--stream-check {text!r}: expected CONC:IN:OUT:REPS, positive integers (e.g. 64:512:256:3)")
    return dict(zip(("conc", "input_len", "output_len", "reps"), map(int, parts), strict=True))


def job_timeout(args: RunArgs, model: str, backend: str) -> float:
    return args.timeouts.get(f"{model}:{backend}", args.job_timeout_s)


def execute(args: RunArgs) -> int:
    if args.engine == "served":
        provider, provider_note = None, "resolver (entrypoint.inputs.gather.build_plan with the served options)"
    else:
        provider, provider_note = be.make_plan_provider(args.plan_snapshot, args.plan_gpu)
        planned = [b for b in args.backends if b in ("plan", "plan_vllm_kernel")]
        if provider is None and planned:
            print(f"e2e: dropping backend(s) {', '.join(planned)}: {provider_note}", file=sys.stderr)
            args = replace(args, backends=tuple(b for b in args.backends if b not in planned))
    jobs = plan_jobs(args, provider)
    print(f"e2e: plan source: {provider_note}")
    print_estimate(jobs, args)
    if args.engine == "served" and args.dry_run:
        print_commands(jobs, os.environ)
    refusals = multicast_refusals(jobs)
    if refusals and not args.dry_run:
        print("e2e: refused: NVLink multicast must stay off on multi-GPU rows (benchmarks/e2e/parallel.py):\n  "
              + "\n  ".join(refusals), file=sys.stderr)  # fmt: skip
        return 2
    if args.dry_run:
        return 0

    args.out_dir.mkdir(parents=True, exist_ok=True)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    budget = runner.Budget(args.budget_s)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    rows: list[dict[str, Any]] = []
    raw: list[dict[str, Any]] = []
    stream_rows: list[dict[str, Any]] = []
    engines_log = args.out_dir / "engines.log"
    engines_log.write_text("")
    fi_base = args.work_dir / "flashinfer"
    prewarm_env = runner.engine_env(os.environ, be.EngineSetup("prewarm", None), args.work_dir / "prewarm", {}, fi_base)
    fi_jit_s = runner.prewarm_flashinfer(prewarm_env, timeout_s=min(300.0, budget.left()))
    fi_line = f"FlashInfer JIT (sampler, autotuner delay kernel) prebuilt in {fi_jit_s} s (None: engines build it)"
    print(f"e2e: {fi_line}")
    engines_log.write_text(f"===== {fi_line} =====\n")
    if args.engine == "served" and any(not j.setup.error and not j.setup.same_engine_as for j in jobs):
        # vLLM's model-info entries as the image build bakes them (Dockerfile); each served start seeds them as `serve`
        # does (served_worker)
        baked = runner.bake_model_info(args.work_dir / "model-info", prewarm_env, min(120.0, budget.left()))
        args = replace(args, model_info_env=baked)
    shared = PhaseTritonCache(args.work_dir / "phase-triton") if args.share_triton_cache else None
    for j in jobs:
        layers_real = spec.num_layers(j.config)
        layers = args.layers or layers_real
        if j.setup.same_engine_as:
            rows += report.copy_rows_for(rows, j.model, j.setup.same_engine_as, j.setup)
            continue
        if j.setup.error:
            result, warm_s = runner.JobResult(status="plan_error", error=j.setup.error), None
            start_caches = ""
        else:
            start_caches = shared.describe() if shared else EMPTY
            result, warm_s = _run_engine(args, j, budget, layers, engines_log, shared)
        raw.append({"model": j.model, "backend": j.setup.backend, "split": j.split, "options": j.options,
                    "setup": _setup_dict(j.setup), "argv": list(j.command.argv) if j.command else None,
                    "comm_env": parallel.comm_environment(j.command.env) if j.command else {},
                    "comm_logged": result.log.comm, "status": result.status, "start_s": result.start_s,
                    "warm_start_s": warm_s, "wall_s": result.wall_s, "milestones": result.log.milestones,
                    "autotuner_ops": list(result.log.autotuner_ops), "error": result.error,
                    **report.jit_events(result), "samples": result.samples})  # fmt: skip
        if any(e.get("event") == "stream_check" for e in result.events):
            stream_rows += report.stream_rows(j.model, result)
            report.write_stream_rows(stream_rows, args.out_dir / "stream_check.csv")
        rows += report.build_rows(
            model=j.model, layers=layers, layers_real=layers_real, setup=j.setup, result=result,
            warm_start_s=warm_s, workloads=args.workloads, compile_mode=args.compile_mode, timestamp=stamp,
            facts={**_row_facts(j), "start_caches": start_caches},
        )  # fmt: skip
        report.write_outputs(rows, args.out_dir)
        (args.out_dir / "h200_e2e_raw.json").write_text(json.dumps(raw, indent=1))
    report.write_outputs(rows, args.out_dir)
    drew = report.plot(rows, args.out_dir / "h200_e2e.png")
    print(report.markdown_table(rows))
    print(f"e2e: wrote {args.out_dir}/h200_e2e.csv, .md, _raw.json, engines.log" + (", .png" if drew else ""))
    return 0


def _engine_env(args: RunArgs, j: PlannedJob, cache: Path, extra: dict[str, str]) -> dict[str, str]:
    """One measured start's environment: its caches under `cache`, the run's FlashInfer modules and baked model-info
    entries (as the image has them), and `extra`."""
    return runner.engine_env(os.environ, j.setup, cache, {**extra, **args.model_info_env}, args.work_dir / "flashinfer")


def _row_facts(j: PlannedJob) -> dict[str, Any]:
    """What every CSV row of this job carries besides its measurements: the split, the options, the planned
    communication settings and the shipped tile file the row's Triton reads."""
    comm = parallel.comm_environment(j.command.env) if j.command else {}
    return {"split": j.split, "options": j.options, "tuned_file_shipped": j.tuned_file,
            "comm_env": ";".join(f"{k}={v}" for k, v in comm.items())}  # fmt: skip


def _setup_dict(setup: be.EngineSetup) -> dict[str, Any]:
    return {"moe_backend": setup.moe_backend, "env": dict(setup.env), "unset_env": list(setup.unset_env)}


def _run_engine(
    args: RunArgs,
    j: PlannedJob,
    budget: runner.Budget,
    layers: int,
    engines_log: Path,
    shared: PhaseTritonCache | None = None,
) -> tuple[runner.JobResult, float | None]:
    label, backend = j.model, j.setup.backend
    start_est = runner.estimate_start_s(label, j.setup, served=args.engine == "served")
    if not budget.allows(start_est + 30):
        print(f"e2e: {label} {backend}: skipped, {budget.left():.0f} s left < ~{start_est + 30:.0f} s needed")
        return runner.JobResult(status="skipped_budget", error=f"{budget.left():.0f} s of budget left"), None
    run_dir = (
        j.model_dir if layers == spec.num_layers(j.config) else spec.with_layers(j.model_dir, layers, args.work_dir)
    )
    cache = engine_cache(args.work_dir, label, backend)
    runner.reset_cache(cache)
    env = _engine_env(args, j, cache, shared.env() if shared else {})
    timeout = max(30.0, min(job_timeout(args, label, backend), budget.left() - 10))
    print(f"e2e: {label} {backend}: starting (timeout {timeout:.0f} s, {budget.left():.0f} s of budget left)")
    if args.engine == "served":
        stream = args.stream_check if backend == "plan" else None
        result = _served(args, j, run_dir, env, cache, timeout, "cold", False, stream, engines_log)
    else:
        job = _offline_job(args, j, run_dir, timeout)
        result = _one(job, env, timeout, args.work_dir / f"{label}.{backend}.cold.log", engines_log, "cold")
    start = "–" if result.start_s is None else f"{result.start_s:.1f}"
    print(f"e2e: {label} {backend}: {result.status}, start {start} s, vLLM ran {result.log.moe_backend}")
    if shared is not None:
        print(f"e2e: {label} {backend}: {shared.absorb(cache)} Triton kernels added to the run's shared cache "
              f"({shared.kernels()} in all)")  # fmt: skip
    if j.setup.env.get(be.KERNEL_ENV) == "project" and result.start_s is not None and not result.log.project_kernel:
        # 2026-12-01b: a whole lease's plan row ran without our kernel (no entry point on the device)
        print(
            f"e2e: WARNING {label} {backend}: the plan asked for our kernel ({be.KERNEL_ENV}=project) but the engine "
            "never logged the plugin: vLLM did not load it (is the package's entry point installed?)"
        )
    warm_s = None
    if backend in args.warm_restart and result.start_s is not None and budget.allows(start_est / 2 + 30):
        warm_timeout = max(30.0, min(job_timeout(args, label, backend), budget.left() - 10))
        if args.engine == "served":
            warm = _served(args, j, run_dir, env, cache, warm_timeout, "warm", True, None, engines_log)
        else:
            warm_job = {**_offline_job(args, j, run_dir, warm_timeout), "start_only": True,
                        "result_path": str(args.work_dir / f"{label}.{backend}.warm.jsonl")}  # fmt: skip
            Path(warm_job["result_path"]).unlink(missing_ok=True)
            warm = _one(warm_job, env, warm_timeout, args.work_dir / f"{label}.{backend}.warm.log", engines_log, "warm")
        warm_s = warm.start_s
    if backend in args.start_breakdown and result.start_s is not None:
        _start_breakdown(args, j, run_dir, cache, result, budget, engines_log)
    return result, warm_s


def _offline_job(args: RunArgs, j: PlannedJob, run_dir: Path, timeout: float) -> dict[str, Any]:
    model_len = max_model_len(args)
    assert model_len is not None, "parse_run_args refuses --max-model-len model for the offline engine"
    job = {
        "model_dir": str(run_dir), "engine_kwargs": {**j.setup.engine_kwargs(), **args.engine_args},
        "workloads": [[w.input_len, w.output_len, w.conc] for w in args.workloads], "reps": args.reps,
        "start_only": False, "max_num_seqs": args.max_num_seqs, "max_model_len": model_len,
        "compile": args.compile_mode, "gpu_memory_utilization": args.gpu_memory_utilization,
        "vocab_size": j.config.get("vocab_size", 32000), "soft_deadline": time.time() + timeout - 20,
        "result_path": str(args.work_dir / f"{j.model}.{j.setup.backend}.cold.jsonl"),
    }  # fmt: skip
    Path(job["result_path"]).unlink(missing_ok=True)
    return job


def _served(
    args: RunArgs,
    j: PlannedJob,
    run_dir: Path,
    env: dict[str, str],
    cache: Path,
    timeout: float,
    tag: str,
    start_only: bool,
    stream_check: dict[str, int] | None,
    engines_log: Path,
    jit_probe: bool = False,
    sampler_probe: tuple[int, ...] = (),
    detect_gpu: bool = False,
) -> runner.JobResult:
    """One start of the served engine (python -m entrypoint serve's argv and env), measured unless start_only;
    `jit_probe`: a start-only run that then sends one short batch per workload shape and counts the compiles."""
    model_dir = tokenizer.prepare_model_dir(run_dir, args.work_dir)
    port = free_port()
    planned = {} if detect_gpu else {"gpu": args.plan_gpu, "num_gpus": args.plan_num_gpus,
                                      "vllm_version": args.plan_vllm_version}  # fmt: skip
    cmd = served.served_command(model_dir, j.setup, env, port=port, options=served_options(args), **planned)
    stem = f"{j.model}.{j.setup.backend}.{tag}"
    job = {
        "argv": list(cmd.argv), "served_model": str(model_dir), "port": port,
        "server_log": str(args.work_dir / f"{stem}.server.log"), "cache_dirs": [str(cache)],
        "vocab_size": j.config.get("vocab_size", 32000), "reps": args.reps, "start_only": start_only,
        "workloads": [[w.input_len, w.output_len, w.conc] for w in args.workloads],
        "soft_deadline": time.time() + timeout - 20, "result_path": str(args.work_dir / f"{stem}.jsonl"),
        "stream_check": stream_check, "first_request_len": min(512, (max_model_len(args) or 520) - 8),
        "jit_probe": list(dict.fromkeys((w.input_len, w.conc) for w in args.workloads)) if jit_probe else None,
        "sampler_probe": list(sampler_probe),
    }  # fmt: skip
    Path(job["result_path"]).unlink(missing_ok=True)
    status, wall = runner.run_job(job, cmd.env, args.work_dir / f"{stem}.log", timeout, worker=SERVED_WORKER)
    return _collected(job, status, wall, args.work_dir / f"{stem}.log", engines_log, tag)


def _start_breakdown(
    args: RunArgs,
    j: PlannedJob,
    run_dir: Path,
    cache: Path,
    cold: runner.JobResult,
    budget: runner.Budget,
    engines_log: Path,
) -> None:
    """The served start from: empty caches (the cold run), the same caches again (warm), those caches copied to
    a new path (can a cache made elsewhere be baked into an image?), and today's image (empty caches plus the
    baked Triton cache). One row each in start_breakdown.csv. The baked start also sends one short batch per workload
    shape and counts what that compiled, per rank: the check that the baked cache serves every rank after start."""
    # how the engine was sized belongs to a start's row: CUDA graphs, compiled shapes and the warm-up follow it
    sizing = f"max_num_seqs={args.max_num_seqs} max_model_len={max_model_len(args) or 'checkpoint'}"
    facts = {"split": j.split, "options": f"{j.options}; {sizing}" if j.options else sizing}
    csv_path = args.out_dir / "start_breakdown.csv"

    def keep(row: dict[str, Any]) -> None:
        # each start's row is written as it ends: a device machine lost mid-breakdown (2026-12-02b, twice) still
        # returns the starts that finished before the last collect
        report.append_start_rows([{**row, **facts}], csv_path)
        report.plot_start_breakdown(report.read_start_rows(csv_path), args.out_dir / "start_breakdown.png")

    keep(report.start_row(j.model, j.setup.backend, "empty", cold, args.compile_mode))
    copied = cache.with_name(cache.name + "-copied")
    if copied.exists():
        shutil.rmtree(copied)
    if "copied" in args.start_modes:
        shutil.copytree(cache, copied, symlinks=True)
    baked = cache.with_name(cache.name + "-baked")
    runner.reset_cache(baked)
    spawn = {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}
    modes = [("warm", cache, {}), ("warm-spawn", cache, spawn), ("copied", copied, {})]
    if args.baked_cache is not None:
        image_env = {"TRITON_CACHE_MANAGER": "kernels.triton_cache:BakedFirstCacheManager",
                     "MOE_BAKED_TRITON_CACHE": str(args.baked_cache)}  # fmt: skip
        modes.append(("baked", baked, image_env))
    modes = [m for m in modes if m[0] in args.start_modes]
    warm_s: float | None = None
    for mode, where, extra in modes:
        if not budget.allows(runner.estimate_start_s(j.model, j.setup, served=True) + 30):
            print(f"e2e: {j.model} {j.setup.backend}: start breakdown stops before {mode}: budget")
            break
        env = _engine_env(args, j, where, extra)
        timeout = max(30.0, min(job_timeout(args, j.model, j.setup.backend), budget.left() - 10))
        if mode == "warm-spawn" and warm_s:
            timeout = min(timeout, 2 * warm_s + 30)  # a comparison row: a slow start must not eat the layer's
        probe = mode == "baked"
        result = _served(args, j, run_dir, env, where, timeout, mode, True, None, engines_log, jit_probe=probe)
        keep(report.start_row(j.model, j.setup.backend, mode, result, args.compile_mode))
        warm_s = result.start_s if mode == "warm" else warm_s
        jit = report.jit_events(result)
        print(f"e2e: {j.model} {j.setup.backend}: start from {mode}: {result.start_s} s; fused-MoE JIT per rank at "
              f"start {moe_kernels_by_rank(jit['jit_at_start_by_rank'], jit['rank_cache_dirs']) or '-'}"
              + (f", after start {moe_kernels_by_rank(jit['jit_while_serving_by_rank'], jit['rank_cache_dirs'])}"
                 if probe else ""))  # fmt: skip
    if args.layer_start and j.setup.backend == "plan":
        # the bake is one cold start plus its traffic, the layer start about a warm one (0.6 of a cold one is
        # generous: 0.5 on the H200); the cold start just measured is the better guess when there is one
        cold_s = cold.start_s or runner.estimate_start_s(j.model, j.setup, served=True)
        need = 1.6 * cold_s + 60
        if not budget.allows(need):
            print(f"e2e: {j.model} plan: layer start skipped: {budget.left():.0f} s of budget left < ~{need:.0f} s")
            return
        row, layer = _layer_start(args, j, run_dir, cache, budget, engines_log)
        keep(row)
        # The same machine's starts differ by more than the goal's margin (2026-12-03c: two warm starts 48 and 57 s,
        # the layer 72 s): alternate more of each, so the ratio is read against their spread.
        pairs = args.start_pairs if layer is not None else 0  # no layer, nothing to pair
        for k in range(2, pairs + 2):
            if not budget.allows(2 * (warm_s or cold_s) + 60):
                print(f"e2e: {j.model} plan: start pairs stop before pair {k}: budget")
                break
            env = _engine_env(args, j, cache, {})
            timeout = max(30.0, min(job_timeout(args, j.model, j.setup.backend), budget.left() / 2))
            result = _served(args, j, run_dir, env, cache, timeout, f"warm-{k}", True, None, engines_log)
            keep(report.start_row(j.model, j.setup.backend, f"warm {k}", result, args.compile_mode))
            keep(_start_from_layer(args, j, run_dir, cache, layer, budget, engines_log, k))
            print(f"e2e: {j.model} plan: pair {k}: warm {result.start_s} s, then the layer (start_breakdown.csv)")


def _layer_start(
    args: RunArgs, j: PlannedJob, run_dir: Path, cache: Path, budget: runner.Budget, engines_log: Path
) -> tuple[dict[str, Any], Path | None]:
    """The image with its compile-cache layer (`make cache-layer`): `python -m entrypoint bake-cache` here with the
    row's options, then a start from empty caches seeded from that layer as `serve` seeds them
    (entrypoint.caches.compile_layer.seed), probed with every workload shape and seeded top-p batches; its row counts
    what still compiled at start and after. Returns the row and the layer (None when the bake failed)."""
    model_dir = tokenizer.prepare_model_dir(run_dir, args.work_dir)
    layer = cache.with_name(cache.name + "-layer")
    shutil.rmtree(layer, ignore_errors=True)
    options = {"MOE_SERVING_DEFAULT_PROPERTIES": str(served.IMAGE_DEFAULT_PROPERTIES), **served_options(args)}
    # the image's environment (its baked model-info entries included); bake-cache points the caches at `layer` itself
    env = {**_engine_env(args, j, layer.with_name(layer.name + "-unused"), {}), **options}
    timeout = max(60.0, min(job_timeout(args, j.model, j.setup.backend) + 300, budget.left() / 2))
    log = args.work_dir / f"{j.model}.plan.bake-cache.log"
    argv = [sys.executable, "-m", "entrypoint", "bake-cache", "--model", str(model_dir), "--out", str(layer),
            "--timeout", str(int(timeout))]  # fmt: skip
    t0 = time.perf_counter()
    with log.open("w") as out:
        # its own process group: a bake cut at the timeout must not leave its vLLM server holding the GPU
        bake = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = bake.wait(timeout=timeout + 120)
        except subprocess.TimeoutExpired:
            os.killpg(bake.pid, signal.SIGTERM)
            try:
                bake.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(bake.pid, signal.SIGKILL)
                bake.wait()
            code = -1
    with engines_log.open("a") as f:
        f.write(f"\n===== {j.model}.plan.bake-cache: rc {code} after {time.perf_counter() - t0:.0f} s =====\n")
        f.write(condense(log.read_text(errors="replace")))
    if code != 0:
        print(f"e2e: {j.model} plan: bake-cache failed (rc {code}, {log})")
        failed = runner.JobResult(status="failed", error=f"bake-cache rc {code}")
        return report.start_row(j.model, j.setup.backend, "layer", failed, args.compile_mode), None
    print(f"e2e: {j.model} plan: bake-cache {time.perf_counter() - t0:.0f} s")
    return _start_from_layer(args, j, run_dir, cache, layer, budget, engines_log, 1), layer


def _start_from_layer(
    args: RunArgs,
    j: PlannedJob,
    run_dir: Path,
    cache: Path,
    layer: Path,
    budget: runner.Budget,
    engines_log: Path,
    pair: int,
) -> dict[str, Any]:
    """One start from empty caches seeded from `layer`, as `serve` seeds them. The first (pair 1) is probed with
    every workload shape and seeded top-p batches and counts what compiled after start; later ones time the start."""
    from entrypoint.caches import compile_layer
    from entrypoint.resolve.cpu_engine import CPU_MAX_SAMPLED_BATCH

    mode = "layer" if pair == 1 else f"layer {pair}"
    model_dir = tokenizer.prepare_model_dir(run_dir, args.work_dir)
    where = cache.with_name(cache.name + "-from-layer")
    runner.reset_cache(where)
    env = _engine_env(args, j, where, {compile_layer.LAYER_ENV: str(layer)})
    # the plan serve resolves here (GPU detected, as the bake detected it), and the one line serve logs
    plan = served.served_plan(model_dir, env, port=free_port(), options=served_options(args))
    seeded = compile_layer.seed(plan, env)
    print(f"e2e: {j.model} plan: {mode}: {seeded}")
    if not seeded.startswith("compile cache: seeded "):
        failed = runner.JobResult(status="failed", error=seeded)
        return report.start_row(j.model, j.setup.backend, mode, failed, args.compile_mode)
    timeout = max(30.0, min(job_timeout(args, j.model, j.setup.backend), budget.left() - 10))
    probed = pair == 1
    # seeded batches of 8 and 16 (the CPU engine: 8 only, CPU_MAX_SAMPLED_BATCH)
    sizes = ((CPU_MAX_SAMPLED_BATCH,) if plan.gpu.kind == "cpu" else (8, 16)) if probed else ()
    # the server of this row runs exactly the plan seeded above: the GPU detected, as serve and the bake detect it
    result = _served(args, j, run_dir, env, where, timeout, mode.replace(" ", "-"), True, None, engines_log,
                     jit_probe=probed, sampler_probe=sizes, detect_gpu=True)  # fmt: skip
    jit = report.jit_events(result)
    probe = next((e for e in result.events if e.get("event") == "serving_compiles"), {})
    after = sum((jit.get("jit_while_serving") or {}).values()) if probe else "not probed"
    print(f"e2e: {j.model} plan: start from the layer ({mode}): {result.status}, {result.start_s} s; Triton "
          f"compiles at start {sum((jit.get('jit_at_start') or {}).values())}, while probed {after} "
          f"({probe.get('jit_probe_requests_ok', 0)} probe requests answered)")  # fmt: skip
    return report.start_row(j.model, j.setup.backend, mode, result, args.compile_mode)


def _collected(
    job: dict[str, Any], status: str, wall: float, log: Path, engines_log: Path, tag: str
) -> runner.JobResult:
    text = log.read_text(errors="replace") if log.is_file() else ""
    with engines_log.open("a") as f:
        f.write(f"\n===== {Path(job['result_path']).stem} ({tag}): {status} after {wall:.0f} s =====\n")
        f.write(condense(text))
    return runner.collect(status, runner.read_events(Path(job["result_path"])), text, wall)


def _one(job: dict[str, Any], env: dict[str, str], timeout: float, log: Path, engines_log: Path, tag: str):
    status, wall = runner.run_job(job, env, log, timeout)
    return _collected(job, status, wall, log, engines_log, tag)


def report_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.e2e report")
    p.add_argument("--csv", type=Path, required=True, help="the table to redraw (written when --merge is given)")
    p.add_argument("--merge", type=Path, nargs="+", default=None, metavar="RUN_CSV",
                   help="runs of one session (e.g. one phase per GPU) to combine into --csv first; a measured row "
                        "replaces a skipped one of the same model, backend and workload")  # fmt: skip
    p.add_argument("--out-dir", type=Path, default=None, help="default: the CSV's folder")
    ns = p.parse_args(argv)
    if ns.merge:
        try:
            rows = report.merge_runs([report.read_csv(path) for path in ns.merge])
        except (OSError, ValueError) as exc:
            p.error(f"--merge: {exc}")
    else:
        rows = report.read_csv(ns.csv)
    report.add_ratios(rows)
    if ns.merge:
        report.write_csv(rows, ns.csv)
    out = ns.out_dir or ns.csv.parent
    out.mkdir(parents=True, exist_ok=True)
    stem = ns.csv.stem
    table = report.markdown_table(rows)
    (out / f"{stem}.md").write_text(table)
    drew = report.plot(rows, out / f"{stem}.png")
    print(table)
    print(f"wrote {out / (stem + '.md')}" + (f" and {out / (stem + '.png')}" if drew else " (no matplotlib: no PNG)"))
    return 0


def plans_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.e2e plans")
    p.add_argument("--gpu", default="H200")
    p.add_argument("--out", type=Path, default=DEFAULT_SNAPSHOT)
    ns = p.parse_args(argv)
    plans = {}
    for name in spec.BUNDLED_MODELS:
        d = be.plan_from_resolver(spec.resolve_model_dir(name), ns.gpu)
        plans[name] = {"moe_backend": d.moe_backend, "env": dict(d.env)}
    ns.out.write_text(json.dumps({"gpu": ns.gpu, "vllm": "0.26.0", "plans": plans}, indent=2) + "\n")
    print(ns.out.read_text())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    exit_on_sigterm()  # unwinding lets run_job stop the engine's process group (its own session)
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv.pop(0) if argv and not argv[0].startswith("-") else "run"
    if command == "run":
        return execute(parse_run_args(argv))
    if command == "estimate":
        return execute(parse_run_args([*argv, "--dry-run"]))
    if command == "report":
        return report_main(argv)
    if command == "plans":
        return plans_main(argv)
    print(f"unknown command {command!r}; accepted: run, estimate, report, plans", file=sys.stderr)
    return 2
