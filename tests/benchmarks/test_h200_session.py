"""benchmarks/device/h200_session.sh: the one-lease plan for the H200, checked here in its DRY_RUN mode.

The steps themselves (e2e.sh, tune_and_bench.sh, ...) have their own tests; this checks the scheduling that
decides what a short lease returns: both queues run, each step only when its minimum time is left, results
packed into ≤ 8 files, and the queues outlive the call that started them (their own session).
"""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

from tests.conftest_paths import REPO

SCRIPT = REPO / "benchmarks" / "device" / "h200_session.sh"
QUEUE_A = ["e2e-nemotron", "e2e-mixtral"]
QUEUE_B = ["qwen-start", "own-kernels"]


def _env(tmp_path: Path, gpus: int, deadline_s: int) -> dict[str, str]:
    return {
        **os.environ,
        "DRY_RUN": "1",
        "GPUS": str(gpus),
        "DEADLINE_S": str(deadline_s),
        "RUN_DIR": str(tmp_path / "run"),
        "OUT": str(tmp_path / "out"),
    }


def _session(tmp_path: Path, gpus: int, deadline_s: int) -> tuple[list[str], Path]:
    env = _env(tmp_path, gpus, deadline_s)
    start = subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=30)
    assert start.returncode == 0, start.stderr
    done = subprocess.run(["bash", str(SCRIPT), "wait", "60"], env=env, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0 and "all done" in done.stdout, done.stdout + done.stderr
    status = (tmp_path / "out" / "status.txt").read_text().splitlines()
    return status, tmp_path / "out"


def _steps(status: list[str], queue: str, outcome: str) -> list[str]:
    return [line.split()[1] for line in status if line.startswith(queue + " ") and outcome in line]


def test_two_gpus_run_both_queues_in_order_and_pack_their_results(tmp_path: Path) -> None:
    status, out = _session(tmp_path, gpus=2, deadline_s=3000)
    assert _steps(status, "A", "rc=0") == QUEUE_A
    assert _steps(status, "B", "rc=0") == QUEUE_B
    assert sorted(p.name for p in out.iterdir()) == ["A.tar.gz", "B.tar.gz", "status.txt"]
    with tarfile.open(out / "A.tar.gz") as tar:
        console = tar.extractfile("A/e2e-nemotron/console.log").read().decode()
    # each step writes where `step` points OUT, with the budget the harness must stop by
    assert f"OUT={tmp_path}/run/A/e2e-nemotron" in console
    assert "BUDGET_S=580 bash benchmarks/device/e2e.sh nemotron" in console


def test_one_gpu_runs_queue_b_after_queue_a(tmp_path: Path) -> None:
    status, out = _session(tmp_path, gpus=1, deadline_s=3000)
    assert _steps(status, "A", "rc=0") == QUEUE_A + QUEUE_B
    assert not _steps(status, "B", "rc=") and (out / "A.tar.gz").is_file()


def test_a_step_starts_only_when_its_minimum_time_is_left(tmp_path: Path) -> None:
    # 270 s: too little for the 300 s steps, enough for the own-kernels check (240)
    status, _ = _session(tmp_path, gpus=2, deadline_s=270)
    assert _steps(status, "A", "skipped") == ["e2e-nemotron", "e2e-mixtral"]
    assert _steps(status, "B", "skipped") == ["qwen-start"]
    assert _steps(status, "B", "rc=0") == ["own-kernels"]


def test_a_second_start_while_running_collects_instead_of_restarting(tmp_path: Path) -> None:
    env = _env(tmp_path, gpus=2, deadline_s=3000)
    run = [subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=30)]
    run.append(subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=30))
    assert [r.returncode for r in run] == [0, 0] and "in progress" in run[1].stderr
    done = subprocess.run(["bash", str(SCRIPT), "wait", "60"], env=env, capture_output=True, text=True, timeout=90)
    assert "all done" in done.stdout
    status = (tmp_path / "out" / "status.txt").read_text().splitlines()
    assert _steps(status, "A", "rc=0") == QUEUE_A and _steps(status, "B", "rc=0") == QUEUE_B  # each once
