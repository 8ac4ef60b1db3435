"""The run's engines, planned before anything starts: one job per (model, backend), with its split and command.

Served engine: the model's plan is resolved once with the run's options (`entrypoint.inputs.gather.build_plan`, what
`serve` runs), and every row is that plan with its own MoE backend switch (served.row_command). The split the
plan asks for (parallel.split_of its argv) is the one the tuned-file lookup follows, so `--option
tensor_parallel_degree=4` and the image default `tensor_parallel_degree=max` on `--plan-num-gpus 8` both name
the file vLLM will look for. A plan the resolver refuses becomes `plan_error` rows: no engine starts.
Offline engine: the split comes from `--engine-arg tensor_parallel_size=... enable_expert_parallel=...`.

`--dry-run` prints every served row's exact server argv and the environment it changes (describe_job).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.e2e import backends as be
from benchmarks.e2e import options as bench_opts
from benchmarks.e2e import parallel, runner, served, spec
from benchmarks.e2e.run_args import RunArgs

# The port a planned command names; each run picks a free one (the only argv element besides the model folder,
# a copy with a word tokenizer under --work-dir, that differs at run time).
PLAN_PORT = 8080
# Set by the harness for every engine (runner.engine_env): per-row caches and the process setup, not the plan's.
HARNESS_ENV = (
    "TRITON_CACHE_DIR", "VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH", "FLASHINFER_WORKSPACE_BASE",
    "VLLM_WORKER_MULTIPROC_METHOD", "PYTHONPATH", "PYTHONUNBUFFERED", "VLLM_NO_USAGE_STATS", "HF_HUB_OFFLINE",
    "MOE_SERVING_DEFAULT_PROPERTIES",
)  # fmt: skip


@dataclass
class PlannedJob:
    model: str
    model_dir: Path
    setup: be.EngineSetup
    shape: spec.MoEShape
    config: dict[str, Any]
    estimate_s: float
    command: served.ServedCommand | None = None  # served engine: the server as planned (port PLAN_PORT)
    split: str = ""  # 'tp8', 'tp8ep8' (parallel.Split.label); '' for the offline engine
    options: str = ""  # options.label of the run's --option pairs
    ignored_options: tuple[str, ...] = ()  # what the resolver ignored, with why

    @property
    def ranks(self) -> int:
        return parallel.split_of(self.command.argv).ranks if self.command else 1

    @property
    def tuned_file(self) -> str:
        """The shipped tile file this row's Triton will read ('' when the row names no folder or it has none)."""
        folder = (self.command.env if self.command else self.setup.env).get(be.TUNED_ENV)
        files = be.tuned_files_for(self.shape, Path(folder)) if folder else []
        return files[0].name if files else ""


def engine_cache(work_dir: Path, model: str, backend: str) -> Path:
    return work_dir / "cache" / model / backend


def max_model_len(args: RunArgs) -> int | None:
    """The served engine's max_model_len: the workloads' longest request + 16, a given number, or None (not set:
    the checkpoint's own, as the image serves it)."""
    if args.model_len == "model":
        return None
    if args.model_len.isdigit():
        return int(args.model_len)
    return max(w.input_len + w.output_len for w in args.workloads) + 16


def served_options(args: RunArgs) -> dict[str, str]:
    return served.bench_options(
        max_model_len=max_model_len(args), max_num_seqs=args.max_num_seqs,
        gpu_memory_utilization=args.gpu_memory_utilization, compile_mode=args.compile_mode, extra=args.options,
    )  # fmt: skip


def _estimate(args: RunArgs, label: str, setup: be.EngineSetup) -> float:
    if not setup.starts_engine:
        return 0.0
    est = runner.estimate_start_s(label, setup, served=args.engine == "served")
    est += runner.estimate_measure_s(label, args.workloads, args.reps)
    return est + (60.0 if setup.backend in args.warm_restart else 0.0)


def plan_jobs(args: RunArgs, plan_provider: be.PlanProvider | None) -> list[PlannedJob]:
    """Every job of the run, in order. `plan_provider` serves the offline engine only (the served engine's plan row
    is the plan itself)."""
    jobs: list[PlannedJob] = []
    for name in args.models:
        model_dir = spec.resolve_model_dir(name)
        if args.engine == "served":
            jobs += _served_jobs(args, model_dir)
            continue
        config = spec.load_config(model_dir)
        split = args.engine_args  # the offline engine's own split decides which tuned file vLLM looks up
        tp, expert_parallel = int(split.get("tensor_parallel_size", 1)), bool(split.get("enable_expert_parallel"))
        shape = spec.moe_shape(config, tp, expert_parallel)
        label = spec.model_label(model_dir)
        for setup in be.engine_setups(args.backends, model_dir, shape, plan_provider):
            jobs.append(PlannedJob(label, model_dir, setup, shape, config, _estimate(args, label, setup)))
    return jobs


def _served_jobs(args: RunArgs, model_dir: Path) -> list[PlannedJob]:
    from entrypoint.utils.errors import ConfigError

    config, label, options = spec.load_config(model_dir), spec.model_label(model_dir), served_options(args)
    opts = bench_opts.label(args.options)
    try:
        plan = served.served_plan(model_dir, os.environ, port=PLAN_PORT, options=options, gpu=args.plan.gpu,
                                  num_gpus=args.plan.num_gpus, vllm_version=args.plan.vllm_version)  # fmt: skip
    except ConfigError as exc:
        error = f"resolver refused: {exc}"
        return [PlannedJob(label, model_dir, be.EngineSetup(b, None, note="resolver refused", error=error),
                           spec.moe_shape(config), config, 0.0, options=opts) for b in args.backends]  # fmt: skip
    split = parallel.split_of(plan.vllm_args)
    shape = spec.moe_shape(config, split.moe_ranks, split.expert_parallel)
    decision = be.PlanDecision(plan.moe_backend.value, dict(plan.env), f"resolver, served options, {split.label}")
    jobs = []
    for setup in be.engine_setups(args.backends, model_dir, shape, lambda _dir: decision):
        env = runner.engine_env(os.environ, setup, engine_cache(args.work_dir, label, setup.backend), {},
                                args.work_dir / "flashinfer", args.routing)  # fmt: skip
        command = served.row_command(plan, setup, env, options)
        jobs.append(PlannedJob(label, model_dir, setup, shape, config, _estimate(args, label, setup), command,
                               split.label, opts, plan.ignored_options))  # fmt: skip
    return jobs


def print_estimate(jobs: Sequence[PlannedJob], args: RunArgs) -> float:
    total = sum(j.estimate_s for j in jobs)
    print(f"e2e plan: {len(args.workloads)} workloads × {args.reps} reps; budget {args.budget_s:.0f} s")
    for j in jobs:
        what = f"= {j.setup.same_engine_as} (not run again)" if j.setup.same_engine_as else f"~{j.estimate_s:.0f} s"
        arg = j.setup.moe_backend or "auto"
        model = f"{j.model} {j.split}".strip()
        print(f"  {model:38s} {j.setup.backend:19s} moe_backend={arg:19s} {what}  {j.setup.note}")
    print(f"  expected total ≈ {total:.0f} s ({total / 60:.1f} min)" + (" > budget" if total > args.budget_s else ""))
    return total


def env_changes(env: Mapping[str, str], base: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """(keys set or changed, keys removed) of `env` against `base`, sorted by name."""
    changed = {k: env[k] for k in sorted(env) if base.get(k) != env[k]}
    return changed, sorted(k for k in base if k not in env)


def describe_job(job: PlannedJob, base: Mapping[str, str]) -> list[str]:
    """The dry-run lines of one served row: argv, the environment it changes, the checks it will make."""
    if job.setup.error:
        return [f"    plan_error: {job.setup.error}"]
    if job.command is None or job.setup.same_engine_as:
        return []
    changed, removed = env_changes(job.command.env, base)
    plan_env = {k: v for k, v in changed.items() if k not in HARNESS_ENV}
    lines = [f"    argv: {shlex.join(job.command.argv)}"]
    lines += [f"    env+ {k}={v}" for k, v in plan_env.items()] or ["    env+ (nothing beyond the harness's)"]
    lines += [f"    env- {k}" for k in removed]
    lines.append("    harness env: " + " ".join(k for k in HARNESS_ENV if k in changed)
                 + f" (caches under {engine_cache(Path('WORK'), job.model, job.setup.backend)})")  # fmt: skip
    comm = parallel.comm_environment(job.command.env)
    lines.append("    comm env: " + (" ".join(f"{k}={v}" for k, v in comm.items()) or "(none)"))
    if job.ranks > 1:
        problems = parallel.multicast_problems(job.command.env)
        lines.append("    multicast guard: " + ("ok" if not problems else "REFUSED, needs " + ", ".join(problems)))
    lines.append(f"    tuned file: {_tuned_file_line(job)}")
    lines += [f"    ignored: {line}" for line in job.ignored_options]
    return lines


def _tuned_file_line(job: PlannedJob) -> str:
    folder = job.command.env.get(be.TUNED_ENV) if job.command else None
    if not folder:
        return "(no tile folder named: vLLM's own files)"
    return job.tuned_file or f"(none in {folder} for {job.shape.config_file_prefix()}...: vLLM's own files)"


def print_commands(jobs: Sequence[PlannedJob], base: Mapping[str, str]) -> None:
    print(f"e2e dry run: each row's server (the run picks a free port for --port {PLAN_PORT} and serves a copy of the "
          "model folder with a word tokenizer)")  # fmt: skip
    for j in jobs:
        lines = describe_job(j, base)
        if lines:
            name = " ".join(part for part in (j.model, j.split, j.setup.backend) if part)
            print(f"  {name} ({j.options or 'no --option'}):")
            print("\n".join(lines))


def multicast_refusals(jobs: Sequence[PlannedJob]) -> list[str]:
    """One line per multi-GPU row whose environment would let NVLink multicast on (parallel.MULTICAST_OFF)."""
    refusals = []
    for j in jobs:
        if j.command is not None and j.setup.starts_engine and j.ranks > 1:
            problems = parallel.multicast_problems(j.command.env)
            if problems:
                refusals.append(f"{j.model} {j.split} {j.setup.backend}: needs {', '.join(problems)}")
    return refusals
