"""Run the engines: one worker subprocess per (model, backend), each under its own timeout and the budget.

Per engine: a cold start (empty Triton and vLLM caches: Triton JIT, FlashInfer autotune and torch.compile
all start from nothing) that is also measured, then optionally a warm restart on the same caches that only
times the start. A job past its timeout gets SIGUSR1 (stack dump into its log), then SIGKILL for its whole
process group, and the run goes on with the next job; rows it never reached say `skipped_budget`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.e2e.backends import REPO_ROOT, EngineSetup
from benchmarks.e2e.logparse import EngineLog, parse_engine_log, process_gaps
from benchmarks.e2e.routing import routing_env
from benchmarks.e2e.spec import Workload

# How the image starts vLLM's EngineCore (the Dockerfile's VLLM_WORKER_MULTIPROC_METHOD; a test keeps the two equal).
# fork since 2026-12-03: spawn re-imported vLLM in the core, 22-25 s of a warm start (docs/results/start-time.md).
# vLLM still falls back to spawn by itself when CUDA is already up in the parent
# (vllm/utils/system_utils.py _maybe_force_spawn).
IMAGE_START_METHOD = "fork"

SITE_DIR = Path(__file__).resolve().parent / "_site"

# Seconds, seen on the H200 with vLLM 0.26 (offline-vllm README): cold engine starts incl. ~20 s import.
_START_ESTIMATE = {"triton": 155.0, "flashinfer_cutlass": 65.0, "auto": 65.0}
# The served configuration (2026-12-01, Qwen3-30B-A3B, one H200): 130-175 s cold, whatever the backend.
_SERVED_START_S = 150.0
# Decode cost relative to Qwen3-30B-A3B on one H200 (active parameters; the 8-GPU ones are estimates, not
# measurements: a TP8 step adds two all-reduces per layer), and cold-start factors for the big models (more weights
# to initialise, torch.compile and NCCL set-up per rank; estimates).
_MODEL_WEIGHT = {
    "glm-4.5-air": 3.0,
    "phi-3.5-moe": 1.8,
    "mixtral-8x7b": 2.5,
    "nemotron": 1.3,
    "235b": 3.0,
    "deepseek-v3": 4.0,
    "8x22b": 3.0,
    "maverick": 2.5,
}
_START_FACTOR = {
    # Nemotron-3-Nano's served start from empty caches: 178 s on the H200 (2026-12-04b), 196-212 s on an H100
    # (2026-12-05c/d)
    "nemotron": 1.35,
    "glm-4.5-air": 1.6,
    "phi-3.5-moe": 1.1,
    "mixtral-8x7b": 1.2,
    "235b": 1.7,
    "deepseek-v3": 2.3,
    "8x22b": 1.5,
    "maverick": 1.9,
}


@dataclass
class JobResult:
    status: str  # ok | timeout | failed | skipped_budget | truncated
    start_s: float | None = None
    import_s: float | None = None
    versions: dict[str, str] = field(default_factory=dict)
    samples: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # every event, for what only some workers emit
    log: EngineLog = field(default_factory=EngineLog)
    error: str = ""
    wall_s: float = 0.0


def model_weight(label: str) -> float:
    return next((w for key, w in _MODEL_WEIGHT.items() if key in label), 1.0)


def estimate_start_s(label: str, setup: EngineSetup, served: bool = False) -> float:
    kind = "triton" if setup.moe_backend == "triton" else (setup.moe_backend or "auto")
    base = _SERVED_START_S if served else _START_ESTIMATE.get(kind, 120.0)
    return base * next((f for key, f in _START_FACTOR.items() if key in label), 1.0)


# What a run makes once before its first engine (benchmarks.e2e.run._prepare), as an H100 lease took it on 2026-12-05:
# FlashInfer's JIT modules from the work dir's cache 7-10 s, vLLM's model-info entries 31-38 s, the HBM probe ~5 s
PREPARE_S = 55.0


def with_preparation(need_s: float) -> float:
    """Seconds a run's budget must hold for `need_s` of engines: the preparation comes first (PREPARE_S)."""
    return need_s + PREPARE_S


def engine_need_s(label: str, setup: EngineSetup, served: bool) -> float:
    """Seconds of budget an engine must have left to be started: its start estimate and 30 s to measure."""
    return estimate_start_s(label, setup, served) + 30


def first_engine_need_s(jobs: Sequence[Any], served: bool) -> float | None:
    """What the cheapest engine to start needs (engine_need_s), or None where no job starts an engine (plan errors,
    rows copied from another engine)."""
    needs = [engine_need_s(j.model, j.setup, served) for j in jobs if j.setup.starts_engine]
    return min(needs) if needs else None


def ratio_engines_need_s(jobs: Sequence[Any], served: bool) -> float | None:
    """What the first two engines of a run that compares backends need together (engine_need_s each; a lower bound,
    since each is counted with 30 s of measurement), or None where it does not compare: no ratio needs less."""
    engines = [j for j in jobs if j.setup.starts_engine]
    if len({j.setup.backend for j in engines}) < 2:  # one backend (several models): its rows are not compared
        return None
    return sum(engine_need_s(j.model, j.setup, served) for j in engines[:2])


def ratio_engines_verdict(ratio_need: float, budget_s: float) -> tuple[bool, str]:
    """Whether a run of several engines has the budget to start its first two with the preparation, the least that
    gives a ratio, and the line that says so. 2026-12-07d: two plan ÷ auto runs of 350 and 330 s on an H100 measured
    the plan (a 167 s start), then skipped auto ("130 s left < ~210 s needed"): 468 s of a lease and no ratio."""
    need = with_preparation(ratio_need)
    fits = budget_s >= need
    verdict = "fits" if fits else "does not fit: the second would be skipped, and with it every ratio"
    return fits, f"e2e: first two engines: need ~{need:.0f} s with the preparation; budget {budget_s:.0f} s: {verdict}"


def first_engine_verdict(first_need: float | None, budget_s: float) -> tuple[bool, str]:
    """Whether a run's budget holds its preparation and its cheapest engine (first_engine_need_s), and the line that
    says so. Dry runs print it too: the queue check (tests/benchmarks/test_queue_budgets.py) reads it."""
    if first_need is None:
        return True, "e2e: first engine: none to start"
    need = with_preparation(first_need)
    fits = budget_s >= need
    verdict = "fits" if fits else "does not fit"
    return fits, f"e2e: first engine: needs ~{need:.0f} s with the preparation; budget {budget_s:.0f} s: {verdict}"


def estimate_measure_s(label: str, workloads: Sequence[Workload], reps: int) -> float:
    """Rough: prefill at 20k tok/s, decode step 7 ms + 0.1 ms per sequence, scaled by model size."""
    total = 0.0
    for w in workloads:
        prefill = w.input_len * w.conc / 20000
        decode = w.output_len * (0.007 + 0.0001 * w.conc)
        total += (reps + 0.3) * (prefill + decode) * model_weight(label)
    return total + 5.0


def run_job(
    job: dict[str, Any],
    env: Mapping[str, str],
    log_path: Path,
    timeout_s: float,
    python: str = sys.executable,
    worker: str = "benchmarks.e2e.worker",
) -> tuple[str, float]:
    """Start the worker (module `worker`) in its own session; returns (ok|failed|timeout, wall seconds)."""
    job_path = Path(job["result_path"]).with_suffix(".job.json")
    job_path.write_text(json.dumps(job, indent=2))
    t0 = time.monotonic()
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [python, "-m", worker, str(job_path)],
            cwd=REPO_ROOT,
            env=dict(env),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the engine core dies with it
        )
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return "timeout", time.monotonic() - t0
        except BaseException:  # SIGTERM (made SystemExit by cli.main), Ctrl-C: nobody else stops that session
            _kill_group(proc)
            raise
    return ("ok" if rc == 0 else "failed"), time.monotonic() - t0


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGUSR1)  # faulthandler: every thread's stack into the log
        time.sleep(5)
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    _wait_for_group_exit(proc.pid, timeout_s=5.0)


def _wait_for_group_exit(pgid: int, timeout_s: float) -> None:
    """SIGKILL is delivered asynchronously: the engine core can hold GPU memory for a moment after killpg returns.

    The next job must not start before it is gone. Zombies count as gone: an orphan reparented to a PID 1 that never
    reaps (a container's process_api, say) stays a group member for good, though it holds nothing.
    """
    deadline = time.monotonic() + timeout_s
    while _live_group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)


def _live_group_members(pgid: int) -> list[int]:
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited while we looked
        state, group = fields[0], int(fields[2])
        if group == pgid and state != "Z":
            members.append(int(stat.parent.name))
    return members


def read_events(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    events = []
    for line in path.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut by SIGKILL
    return events


def collect(status: str, events: list[dict[str, Any]], log_text: str, wall_s: float) -> JobResult:
    result = JobResult(status=status, log=parse_engine_log(log_text), wall_s=wall_s, events=list(events))
    for ev in events:
        kind = ev.get("event")
        if kind == "versions":
            result.import_s = ev.get("import_s")
            result.versions = {k: str(ev[k]) for k in ("vllm", "torch", "triton", "flashinfer", "gpu") if k in ev}
        elif kind == "engine_started":
            result.start_s = ev["start_s"]
            if "launched_at" in ev:  # the served engine's (served_worker); the offline engine has no launch
                result.log.durations.update(process_gaps(log_text, float(ev["launched_at"])))
        elif kind == "sample":
            result.samples.append(ev)
        elif kind == "error":
            result.error = ev.get("error", "")
        elif kind == "done" and ev.get("truncated") and status == "ok":
            result.status = "truncated"
    if status != "ok" and not result.error:
        tail = [line for line in log_text.splitlines() if line.strip()][-1:] or [""]
        result.error = f"{status}; last milestone: {result.log.last_milestone}; last line: {tail[0][:300]}"
    return result


def engine_env(
    base: Mapping[str, str],
    setup: EngineSetup,
    cache_dir: Path,
    extra: Mapping[str, str],
    flashinfer_base: Path | None = None,
    routing: str | None = None,
) -> dict[str, str]:
    """An engine's environment. `routing` (benchmarks/e2e/routing.py) overrides whatever the caller's environment
    says about vLLM's routing simulator; None leaves it as it is (the FlashInfer prewarm routes nothing)."""
    env = {k: v for k, v in base.items() if k not in setup.unset_env}
    env.update(setup.env)
    if routing is not None:
        routing_set, routing_unset = routing_env(routing)
        for key in routing_unset:
            env.pop(key, None)
        env.update(routing_set)
    # as the image, whatever the caller's env; a start breakdown's comparison row (warm-spawn) may ask for another
    env["VLLM_WORKER_MULTIPROC_METHOD"] = IMAGE_START_METHOD
    env.update(extra)
    env["TRITON_CACHE_DIR"] = str(cache_dir / "triton")
    env["VLLM_CACHE_ROOT"] = str(cache_dir / "vllm")  # torch.compile and FlashInfer autotune caches
    env["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir / "inductor")
    env["CUDA_CACHE_PATH"] = str(cache_dir / "nv")
    # FlashInfer's JIT modules (the sampler vLLM warms up in profile_run, the autotuner's delay kernel) are
    # built once per run by prewarm_flashinfer: otherwise only the first engine on a machine pays ~100 s.
    env["FLASHINFER_WORKSPACE_BASE"] = str(flashinfer_base or cache_dir / "flashinfer")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SITE_DIR), str(REPO_ROOT), base.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("HF_HUB_OFFLINE", "1")
    return env


PREWARM_FLASHINFER = (
    "import flashinfer.sampling as s, flashinfer.tllm_utils as u; s.get_sampling_module(); u.get_trtllm_utils_module()"
)


def prewarm_flashinfer(env: Mapping[str, str], timeout_s: float, python: str = sys.executable) -> float | None:
    """Build FlashInfer's JIT modules into env's FLASHINFER_WORKSPACE_BASE; seconds taken, None if it failed."""
    t0 = time.monotonic()
    try:
        done = subprocess.run([python, "-c", PREWARM_FLASHINFER], env=dict(env), timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return None
    return time.monotonic() - t0 if done.returncode == 0 else None


MODEL_INFO_MARKER = "made_by_the_harness.txt"  # "vllm VERSION" and the bake's line, once it succeeded


def _vllm_version() -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return None


def bake_model_info(
    root: Path, env: Mapping[str, str], timeout_s: float, python: str = sys.executable
) -> dict[str, str]:
    """vLLM's model-info entries made as the image build makes them (entrypoint.caches.model_info), once per work dir
    and vLLM version (each harness run of a queue took 31-38 s for it on 2026-12-05): the variable that makes each
    served start seed them as `serve` does, or {} (and the reason printed) if the bake failed here."""
    from entrypoint.caches.model_info import BAKED_ENV

    version, marker = _vllm_version(), root / MODEL_INFO_MARKER
    stamp = f"vllm {version}\n"
    if version and marker.is_file() and marker.read_text().startswith(stamp):
        print(f"e2e: model info: reused from this work dir ({marker.read_text()[len(stamp) :].strip()})")
        return {BAKED_ENV: str(root)}
    cmd = [python, "-m", "entrypoint.caches.model_info", "bake", "--out", str(root)]
    try:
        done = subprocess.run(cmd, env={**env, "VLLM_LOGGING_LEVEL": "ERROR"}, timeout=timeout_s, check=False,
                              capture_output=True, text=True)  # fmt: skip
    except subprocess.TimeoutExpired:
        print(f"e2e: model info not baked (over {timeout_s:.0f} s): engines inspect the model class at start")
        return {}
    lines = [line for line in done.stdout.splitlines() if line.startswith("model info: ")]
    if done.returncode != 0 or not lines:
        print(f"e2e: model info not baked (rc {done.returncode}: {done.stderr.strip()[-300:]})")
        return {}
    print(f"e2e: {lines[-1]}")
    if version:
        marker.write_text(f"{stamp}{lines[-1]}\n")
    return {BAKED_ENV: str(root)}


def reset_cache(cache_dir: Path) -> None:
    if cache_dir.exists():
        shutil.rmtree(cache_dir)
    cache_dir.mkdir(parents=True)


class Budget:
    """Wall-clock budget for the whole run; `clock` is injectable for tests."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._end = clock() + seconds

    def left(self) -> float:
        return self._end - self._clock()

    def allows(self, needed_s: float) -> bool:
        return self.left() >= needed_s
