"""A run of the harness: plan every (model, backend) job, start each engine in turn within the budget, and write
the rows after each engine (h200_e2e.csv / .md / .png, h200_e2e_raw.json, engines.log)."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from benchmarks.e2e import backends as be
from benchmarks.e2e import floor_rows, one_engine, parallel, report, routing, run_args, runner, spec, start_experiments
from benchmarks.e2e.floor_plot import plot_run
from benchmarks.e2e.jobs import PlannedJob, engine_cache, multicast_refusals, plan_jobs, print_commands, print_estimate
from benchmarks.e2e.phase_cache import EMPTY, PhaseTritonCache
from benchmarks.e2e.run_args import RunArgs


def execute(args: RunArgs) -> int:
    if args.engine == "served":
        provider, provider_note = None, "resolver (entrypoint.inputs.gather.build_plan with the served options)"
    else:
        provider, provider_note = be.make_plan_provider(args.plan.snapshot, args.plan.gpu, args.plan.vllm_version)
        planned = [b for b in args.backends if b in be.PLAN_ROWS]
        if provider is None and planned:
            print(f"e2e: dropping backend(s) {', '.join(planned)}: {provider_note}", file=sys.stderr)
            args = replace(args, backends=tuple(b for b in args.backends if b not in planned))
    jobs = plan_jobs(args, provider)
    print(f"e2e: plan source: {provider_note}")
    print(f"e2e: routing: {args.routing} ({routing.ROUTINGS[args.routing]})")
    if args.pin:
        print(f"e2e: pinning: {args.pin} (benchmarks/e2e/pinning.py; a comparison row: serve never pins)")
    print_estimate(jobs, args)
    served = args.engine == "served"
    first_need = runner.first_engine_need_s(jobs, served=served)
    fits, verdict = runner.first_engine_verdict(first_need, args.budget_s)  # the budget starts below, ms from here
    print(verdict)
    ratio_need = runner.ratio_engines_need_s(jobs, served=served)
    if ratio_need is not None:
        ratio_fits, ratio_verdict = runner.ratio_engines_verdict(ratio_need, args.budget_s)
        print(ratio_verdict)
        if fits and not ratio_fits and not args.dry_run:
            need = runner.with_preparation(ratio_need)
            print(f"e2e: refused: the first two engines need ~{need:.0f} s to start and the budget is "
                  f"{args.budget_s:.0f} s: the second would be skipped and no ratio would come; raise the budget "
                  "(BUDGET_S) or run one engine", file=sys.stderr)  # fmt: skip
            return 2
    if served and args.dry_run:
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
    hbm: float | None = None
    if fits:
        args, hbm = _prepare(args, jobs, budget, engines_log)
    else:
        # 2026-12-05c: three harness runs spent ~50 s each on this preparation, then skipped their only engine
        print(
            f"e2e: no engine fits: {budget.left():.0f} s left < ~{runner.with_preparation(first_need):.0f} s (the "
            f"preparation ~{runner.PREPARE_S:.0f} s and the first engine); every row is written as skipped_budget"
        )
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
        elif not fits:
            result, warm_s = runner.JobResult(status="skipped_budget", error="no engine fitted the budget"), None
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
                    **report.jit_events(result), "samples": result.samples,
                    "pinned": next((e for e in result.events if e.get("event") == "pinned"), None)})  # fmt: skip
        if any(e.get("event") == "stream_check" for e in result.events):
            stream_rows += report.stream_rows(j.model, result)
            report.write_stream_rows(stream_rows, args.out_dir / "stream_check.csv")
        job_rows = report.build_rows(
            model=j.model, layers=layers, layers_real=layers_real, setup=j.setup, result=result,
            warm_start_s=warm_s, workloads=args.workloads, compile_mode=args.compile_mode, timestamp=stamp,
            facts={**_row_facts(j), "start_caches": start_caches, "routing": args.routing,
                   "pinning": args.pin},
        )  # fmt: skip
        # a reduced-layer engine (--layers) reads fewer bytes than the checkpoint's geometry says, and a split's
        # ranks read their shards side by side (floor_rows.single_gpu): no floor there yet
        whole = layers == layers_real and floor_rows.single_gpu(j.split)
        floor_rows.add_floor_checks(job_rows, j.model_dir, args.routing, hbm if whole else None)
        rows += job_rows
        report.write_outputs(rows, args.out_dir)
        (args.out_dir / "h200_e2e_raw.json").write_text(json.dumps(raw, indent=1))
    report.write_outputs(rows, args.out_dir)
    drew = plot_run(rows, args.out_dir / "h200_e2e.png")
    print(report.markdown_table(rows))
    print(f"e2e: wrote {args.out_dir}/h200_e2e.csv, .md, _raw.json, engines.log" + (", .png" if drew else ""))
    return 0


def _prepare(
    args: RunArgs, jobs: list[PlannedJob], budget: runner.Budget, engines_log: Path
) -> tuple[RunArgs, float | None]:
    """What every engine of the run shares, made once before the first: FlashInfer's JIT modules, vLLM's model-info
    entries (served engines) and the HBM read bandwidth the floor checks divide by (None: not measured)."""
    served = args.engine == "served" and any(j.setup.starts_engine for j in jobs)
    prewarm_env = shared_env(args.work_dir)
    prepared = prepare_shared(args.work_dir, budget, served, prewarm_env)
    engines_log.write_text(f"===== {prepared.flashinfer_line} =====\n")
    if served:
        args = replace(args, model_info_env=prepared.model_info_env)
    if args.hbm_read_tbps:
        hbm, hbm_line = args.hbm_read_tbps * 1e12, f"HBM read bandwidth: {args.hbm_read_tbps} TB/s (--hbm-read-tbps)"
    else:
        hbm, hbm_line = floor_rows.measure_bandwidth(prewarm_env, timeout_s=min(120.0, budget.left()))
    print(f"e2e: {hbm_line}")
    return args, hbm


def shared_env(work_dir: Path) -> dict[str, str]:
    """The environment the shared preparation runs in: FlashInfer's workspace is the work dir's, as every engine's."""
    return runner.engine_env(os.environ, be.EngineSetup("prewarm", None), work_dir / "prewarm", {},
                             work_dir / "flashinfer")  # fmt: skip


class Prepared(NamedTuple):
    flashinfer_s: float | None  # seconds FlashInfer's JIT took; None: it failed, and each engine builds it
    flashinfer_line: str  # what the run's log and engines.log say about it
    model_info_env: dict[str, str]  # the variable that makes a start seed vLLM's model info; {}: not baked


def prepare_shared(
    work_dir: Path, budget: runner.Budget, served: bool, env: Mapping[str, str] | None = None
) -> Prepared:
    """The work dir's FlashInfer JIT modules and, for served engines, vLLM's model-info entries. Each is made once
    per work dir: a later run of the same work dir reuses them. On a fresh host the JIT alone took 121 s (an H100,
    2026-12-05e), against 7-10 s from the work dir's cache. `env`: shared_env(work_dir), where the caller has it."""
    env = shared_env(work_dir) if env is None else env
    fi_jit_s = runner.prewarm_flashinfer(env, timeout_s=min(300.0, budget.left()))
    fi_line = f"FlashInfer JIT (sampler, autotuner delay kernel) prebuilt in {fi_jit_s} s (None: engines build it)"
    print(f"e2e: {fi_line}", flush=True)
    # vLLM's model-info entries as the image build bakes them (Dockerfile); each served start seeds them as `serve`
    # does (served_worker)
    baked = runner.bake_model_info(work_dir / "model-info", env, min(120.0, budget.left())) if served else {}
    return Prepared(fi_jit_s, fi_line, baked)


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
    need = runner.engine_need_s(label, j.setup, served=args.engine == "served")
    if not budget.allows(need):
        print(f"e2e: {label} {backend}: skipped, {budget.left():.0f} s left < ~{need:.0f} s needed")
        return runner.JobResult(status="skipped_budget", error=f"{budget.left():.0f} s of budget left"), None
    run_dir = (
        j.model_dir if layers == spec.num_layers(j.config) else spec.with_layers(j.model_dir, layers, args.work_dir)
    )
    cache = engine_cache(args.work_dir, label, backend)
    runner.reset_cache(cache)
    env = one_engine.engine_env(args, j, cache, shared.env() if shared else {})
    timeout = max(30.0, min(run_args.job_timeout(args, label, backend), budget.left() - 10))
    print(f"e2e: {label} {backend}: starting (timeout {timeout:.0f} s, {budget.left():.0f} s of budget left)")
    if args.engine == "served":
        stream = args.stream_check if backend == "plan" else None
        result = one_engine.serve(args, j, run_dir, env, cache, timeout, "cold", False, stream, engines_log)
    else:
        job = one_engine.offline_job(args, j, run_dir, timeout)
        log = args.work_dir / f"{label}.{backend}.cold.log"
        result = one_engine.run_offline(job, env, timeout, log, engines_log, "cold")
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
        warm_timeout = max(30.0, min(run_args.job_timeout(args, label, backend), budget.left() - 10))
        if args.engine == "served":
            warm = one_engine.serve(args, j, run_dir, env, cache, warm_timeout, "warm", True, None, engines_log)
        else:
            warm_job = {**one_engine.offline_job(args, j, run_dir, warm_timeout), "start_only": True,
                        "result_path": str(args.work_dir / f"{label}.{backend}.warm.jsonl")}  # fmt: skip
            Path(warm_job["result_path"]).unlink(missing_ok=True)
            log = args.work_dir / f"{label}.{backend}.warm.log"
            warm = one_engine.run_offline(warm_job, env, warm_timeout, log, engines_log, "warm")
        warm_s = warm.start_s
    if backend in args.starts.backends and result.start_s is not None:
        start_experiments.start_breakdown(args, j, run_dir, cache, result, budget, engines_log)
    return result, warm_s
