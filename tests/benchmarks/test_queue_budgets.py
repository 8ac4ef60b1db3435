"""The shipped GPU queues (benchmarks/device/queues/*.txt) against the harness's own start estimates.

A GPU session is 30 minutes, and twice (2026-12-05c, 2026-12-05d, both on an H100) a queue step ran its preparation
and then skipped its only engine: `nemotron-pin` split 300 s over two variants, `nemotron-profile` could start with
150 s. Here every e2e.sh step of every queue is planned in its dry-run mode with the least time the queue may give it
(its MIN_S), and each harness run in it must say that its first engine fits ("e2e: first engine: ... fits";
runner.first_engine_verdict). With the time the step is written for (its MAX_S), a run that compares backends must
also start its first two engines (runner.ratio_engines_verdict): 2026-12-07d spent 468 s of GPU time on two runs that
measured the plan and skipped auto.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.benchmarks.e2e_dry_run import dry_run_env
from tests.conftest_paths import REPO

QUEUES = REPO / "benchmarks" / "device" / "queues"
VERDICT = re.compile(r"^e2e: first (?:engine|two engines): .*$", re.M)
GPUS_OF_QUEUE = {"h200": 1, "x4": 4, "x8": 8}  # the machine each queue is written for
# what e2e.sh reads from its environment: only the queue line may set it
E2E_ENV = re.compile(
    r"^(BUDGET_S|STEP_LIMIT_S|WORK_DIR|VLLM_SITE|VLLM_PIECES|START_MODES|BAKED_CACHE|BAKE_TIMEOUT_S|GPUS|"
    r"CUDA_VISIBLE_DEVICES|PLAN_VLLM_VERSION|ROUTING\w*|CONC|LONG_CONC|MODEL|MIN_VARIANT_S|DRY_RUN|TUNE\w*|PIN|"
    r"PROFILE_\w*|ATTN_BACKENDS|FI_DIAG_OFF|OUT)$"
)


class Step(NamedTuple):
    queue: str
    name: str
    min_s: int
    command: str
    max_s: int = 0


def queue_steps(path: Path) -> list[Step]:
    """The active steps of one queue file (run_queue.sh's syntax: NAME MIN_S MAX_S COMMAND [&])."""
    steps = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or line == "wait":
            continue
        name, min_s, _max_s, command = line.split(None, 3)
        steps.append(Step(path.stem, name, int(min_s), command.removesuffix("&").strip(), int(_max_s)))
    return steps


PREPARE = "bash benchmarks/device/e2e.sh prepare"  # starts no engine: tested on its own below
E2E_STEPS = [
    s
    for q in sorted(QUEUES.glob("*.txt"))
    for s in queue_steps(q)
    if "benchmarks/device/e2e.sh" in s.command and not s.command.endswith(PREPARE)
]


def plan_step(step: Step, tmp_path: Path, limit_s: int | None = None) -> subprocess.CompletedProcess[str]:
    """The step's command as run_queue.sh runs it, in e2e.sh's dry-run mode, cut at its minimum (or at limit_s)."""
    base = {k: v for k, v in os.environ.items() if not E2E_ENV.match(k)}
    # PIN: nemotron-pin reads this host's topology otherwise
    pin = "api=0;engine=0-1;client=1"
    limit = str(limit_s or step.min_s)
    env = dry_run_env(tmp_path, GPUS_OF_QUEUE.get(step.queue, 1), base, STEP_LIMIT_S=limit, PIN=pin)
    return subprocess.run(["bash", "-c", step.command], env=env, capture_output=True, text=True, timeout=120, cwd=REPO)


def verdicts(done: subprocess.CompletedProcess[str]) -> list[str]:
    return VERDICT.findall(done.stdout)


def test_the_queues_have_e2e_steps_to_check() -> None:
    assert sorted(q.stem for q in QUEUES.glob("*.txt")) == sorted(GPUS_OF_QUEUE)
    assert len(E2E_STEPS) >= 3, E2E_STEPS


@pytest.mark.parametrize("queue", sorted(QUEUES.glob("*.txt")), ids=lambda q: q.stem)
def test_every_queue_prepares_its_work_dir_before_its_first_harness_run(queue: Path) -> None:
    # the dry runs below plan each step's own preparation warm (runner.PREPARE_S); on a fresh host it took 162 s
    # (2026-12-05e), and the first variant of routing-cost skipped its engine
    steps = [s for s in queue_steps(queue) if "benchmarks/device/e2e.sh" in s.command]
    assert steps, f"{queue.stem}: no e2e.sh step"
    assert steps[0].command.endswith(PREPARE), f"{queue.stem}: {steps[0].name} runs before `prepare`"


def test_the_prepare_step_plans_nothing_and_exits_clean(tmp_path: Path) -> None:
    done = plan_step(Step("test", "prepare", 200, f"BUDGET_S=280 {PREPARE}"), tmp_path)
    assert done.returncode == 0 and "dry run: nothing made" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("step", E2E_STEPS, ids=[f"{s.queue}:{s.name}" for s in E2E_STEPS])
def test_every_harness_run_of_a_queued_step_fits_its_first_engine_at_the_steps_minimum(
    step: Step, tmp_path: Path
) -> None:
    done = plan_step(step, tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = verdicts(done)
    assert found, done.stdout[-3000:]
    short = [line for line in found if "first engine:" in line and not line.endswith(": fits")
             and "none to start" not in line]  # fmt: skip
    assert not short, f"{step.queue}:{step.name} at MIN_S={step.min_s}: " + "; ".join(short)


@pytest.mark.parametrize("step", E2E_STEPS, ids=[f"{s.queue}:{s.name}" for s in E2E_STEPS])
def test_every_comparing_harness_run_of_a_queued_step_starts_its_first_two_engines_at_the_steps_maximum(
    step: Step, tmp_path: Path
) -> None:
    # 2026-12-07d: long-mixtral-auto and long-qwen-auto (BUDGET_S 350 and 330) started the plan and skipped auto,
    # 468 s of an H100 without a ratio; e2e.sh would now refuse them, and this check refuses the queue line
    done = plan_step(step, tmp_path, limit_s=step.max_s)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    short = [line for line in verdicts(done) if not line.endswith(": fits") and "none to start" not in line]
    assert not short, f"{step.queue}:{step.name} at MAX_S={step.max_s}: " + "; ".join(short)


@pytest.mark.parametrize(
    ("command", "min_s", "fits"),
    [
        # 2026-12-05d's nemotron-pin: two variants in 300 s; the first got 245 s, the second 54 s. e2e.sh now refuses
        # it before any run (exit 2, no verdict): test_e2e_phases.py has the refusal's words
        ("BUDGET_S=300 bash benchmarks/device/e2e.sh nemotron-pin", 320, []),
        ("BUDGET_S=640 bash benchmarks/device/e2e.sh nemotron-pin", 670, [True, True]),
        # 2026-12-05d's nemotron-profile could start with 150 s: a 120 s harness budget
        ("MODEL=nemotron-3-nano-30b-a3b-fp8 PROFILE_BACKENDS=plan PROFILE_CONC=1 BUDGET_S=250 "
         "bash benchmarks/device/e2e.sh profile", 150, [False]),
        # the tune comes out of the step before the harness starts
        ("MODEL=phi-3.5-moe-fp8-static TUNE_BUDGET_S=400 TUNED_BACKENDS=plan BUDGET_S=570 "
         "bash benchmarks/device/e2e.sh tuned", 600, [False]),
    ],
)  # fmt: skip
def test_the_check_tells_a_step_too_short_for_its_engines(
    command: str, min_s: int, fits: list[bool], tmp_path: Path
) -> None:
    done = plan_step(Step("test", "step", min_s, command), tmp_path)
    assert done.returncode == (0 if fits else 2), done.stdout[-3000:] + done.stderr[-3000:]
    assert [line.endswith(": fits") for line in verdicts(done)] == fits, verdicts(done)
