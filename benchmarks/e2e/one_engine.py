"""One measured start of one engine: the served engine as `python -m entrypoint serve` starts it (serve), or vLLM's
offline engine in-process (offline_job + run_offline), each with its caches and environment (engine_env); its log
condensed into the run's engines.log (collect)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from benchmarks.e2e import profile_capture, runner, served, tokenizer
from benchmarks.e2e.jobs import PlannedJob, max_model_len, served_options
from benchmarks.e2e.logparse import condense
from benchmarks.e2e.run_args import RunArgs
from tools.local_server import free_port

SERVED_WORKER = "benchmarks.e2e.served_worker"


def engine_env(args: RunArgs, j: PlannedJob, cache: Path, extra: dict[str, str]) -> dict[str, str]:
    """One measured start's environment: its caches under `cache`, the run's FlashInfer modules and baked model-info
    entries (as the image has them), and `extra`."""
    return runner.engine_env(os.environ, j.setup, cache, {**extra, **args.model_info_env}, args.work_dir / "flashinfer",
                             args.routing)  # fmt: skip


def offline_job(args: RunArgs, j: PlannedJob, run_dir: Path, timeout: float) -> dict[str, Any]:
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


def serve(
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
    planned = {} if detect_gpu else {"gpu": args.plan.gpu, "num_gpus": args.plan.num_gpus,
                                      "vllm_version": args.plan.vllm_version}  # fmt: skip
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
        "sampler_probe": list(sampler_probe), "pin": args.pin,
        "profile": None if not args.profile_conc or start_only else {
            "concs": list(args.profile_conc), "input_len": args.workloads[0].input_len,
            "output_len": args.profile_tokens, "reps": args.profile_reps,
            "trace_dir": str(profile_capture.trace_dir(args.work_dir)),
            "dest": str(args.out_dir / "profiles" / stem),
        },
    }  # fmt: skip
    Path(job["result_path"]).unlink(missing_ok=True)
    status, wall = runner.run_job(job, cmd.env, args.work_dir / f"{stem}.log", timeout, worker=SERVED_WORKER)
    return collect(job, status, wall, args.work_dir / f"{stem}.log", engines_log, tag)


def collect(job: dict[str, Any], status: str, wall: float, log: Path, engines_log: Path, tag: str) -> runner.JobResult:
    text = log.read_text(errors="replace") if log.is_file() else ""
    with engines_log.open("a") as f:
        f.write(f"\n===== {Path(job['result_path']).stem} ({tag}): {status} after {wall:.0f} s =====\n")
        f.write(condense(text))
    return runner.collect(status, runner.read_events(Path(job["result_path"])), text, wall)


def run_offline(job: dict[str, Any], env: dict[str, str], timeout: float, log: Path, engines_log: Path, tag: str):
    status, wall = runner.run_job(job, env, log, timeout)
    return collect(job, status, wall, log, engines_log, tag)
