"""The e2e harness's engine subprocesses: timeouts and SIGTERM kill the whole group, failures say where, and the
budget reads its clock."""

from __future__ import annotations

import math
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.e2e import cli, runner


def _fake_python(tmp_path: Path, body: str) -> str:
    script = tmp_path / "fake_python"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return str(script)


def _alive(pid: int) -> bool:
    """A killed process whose reaper has not run yet is a zombie ('Z'): that counts as dead."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_a_job_past_its_timeout_is_killed_with_its_process_group(tmp_path: Path) -> None:
    # The fake worker starts a grandchild (like vLLM's engine core) that must die with it; both survive
    # SIGUSR1 (faulthandler answers it in the real engine), so only the group SIGKILL can end them.
    pidfile = tmp_path / "child.pid"
    python = _fake_python(tmp_path, f"trap '' USR1; (exec sleep 300) & echo $! > {pidfile}; echo started; wait; wait")
    job = {"result_path": str(tmp_path / "r.jsonl")}
    t0 = time.monotonic()
    # 3 s: the fake worker must have printed "started" first, also on a loaded 2-core CI machine (1 s was not).
    status, _ = runner.run_job(job, {"PATH": "/usr/bin:/bin"}, tmp_path / "log", timeout_s=3.0, python=python)
    assert status == "timeout" and time.monotonic() - t0 < 20
    assert "started" in (tmp_path / "log").read_text()
    # SIGKILL lands asynchronously; give the kernel a bounded moment rather than racing it.
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


def test_sigterm_to_the_harness_kills_the_engine_group_too(tmp_path: Path) -> None:
    # run_queue.sh wraps the harness in `timeout`, which signals only the harness's own group; the engine
    # (own session) must not outlive it holding the GPU.
    pidfile = tmp_path / "child.pid"
    python = _fake_python(tmp_path, f"trap '' USR1; (exec sleep 300) & echo $! > {pidfile}; wait; wait")
    harness = (
        "from pathlib import Path\n"
        "from benchmarks.e2e import runner\n"
        "from benchmarks.sigterm import exit_on_sigterm\n"
        "exit_on_sigterm()  # what cli.main installs\n"
        f"runner.run_job({{'result_path': '{tmp_path}/r.jsonl'}}, {{'PATH': '/usr/bin:/bin'}}, Path('{tmp_path}/log'),"
        f" timeout_s=300, python='{python}')\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", harness], cwd=runner.REPO_ROOT)
    deadline = time.monotonic() + 30
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    grandchild = int(pidfile.read_text())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


def test_the_harness_turns_sigterm_into_an_exit_that_unwinds(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    try:
        cli.main(["estimate", "--models", "qwen3-30b-a3b-fp8-static", "--backends", "triton", "--conc", "1",
                  "--plan-gpu", "H200", "--work-dir", str(tmp_path)])  # fmt: skip
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler)
        with pytest.raises(SystemExit) as exit_info:
            handler(signal.SIGTERM, None)
        assert exit_info.value.code == 143
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_failing_job_is_reported_with_its_last_milestone(tmp_path: Path) -> None:
    python = _fake_python(tmp_path, "echo 'Loading weights took 1.0 seconds'; echo 'RuntimeError: boom'; exit 3")
    job = {"result_path": str(tmp_path / "r.jsonl")}
    status, wall = runner.run_job(job, {"PATH": "/usr/bin:/bin"}, tmp_path / "log", timeout_s=30, python=python)
    result = runner.collect(status, [], (tmp_path / "log").read_text(), wall)
    assert result.status == "failed"
    assert "last milestone: weights_loaded" in result.error and "RuntimeError: boom" in result.error


def test_events_cut_by_a_kill_are_skipped_and_truncation_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"event": "engine_started", "start_s": 12.5}\n{"event": "done", "truncated": true}\n{"eve')
    result = runner.collect("ok", runner.read_events(path), "", 1.0)
    assert result.start_s == 12.5 and result.status == "truncated"


def test_budget_uses_the_injected_clock() -> None:
    now = [100.0]
    budget = runner.Budget(60, clock=lambda: now[0])
    assert budget.allows(60) and not budget.allows(61)
    now[0] += 50
    assert math.isclose(budget.left(), 10)
