"""benchmarks/device/import_profile.sh on the CPU vLLM: the three timings land in its CSV, the costliest imports in
their summary, and a failing command is said, not hidden (the H200 host runs it once per run, unattended)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest_paths import FIXTURE_MODELS, REPO

SCRIPT = REPO / "benchmarks" / "device" / "import_profile.sh"


def _profile(out: Path, model: Path) -> subprocess.CompletedProcess[str]:
    # an FP8 checkpoint resolves for an H200 only (the CPU engine has no FP8 MoE kernels)
    # the script calls python3: the one running these tests, which has the CPU vLLM
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = {
        **os.environ,
        "OUT": str(out),
        "MODEL": str(model),
        "PATH": path,
        "PYTHONPATH": str(REPO),
        "RESOLVE_ARGS": "--gpu H200",
    }
    return subprocess.run(["bash", str(SCRIPT)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def test_it_times_the_resolver_vllms_import_and_its_parser(tmp_path: Path) -> None:
    run = _profile(tmp_path, FIXTURE_MODELS / "qwen3-30b-a3b-fp8-static-synthetic")
    assert run.returncode == 0 and "exited" not in run.stderr, run.stderr
    rows = list(csv.DictReader((tmp_path / "import_profile.csv").open()))
    assert [(r["what"], r["run"]) for r in rows] == [("resolve", "1"), ("import", "1"), ("help", "1")]
    seconds = {r["what"]: float(r["wall_s"]) for r in rows}
    assert seconds["help"] > seconds["import"] > 0  # the parser imports more than vllm.entrypoints.cli.main
    assert "--moe-backend" in (tmp_path / "resolve-1.out").read_text()  # the plan of a FP8 static checkpoint
    top = (tmp_path / "importtime-top.txt").read_text().splitlines()
    assert len(top) == 40 and "vllm" in top[0]


def test_a_missing_model_and_a_failing_command_are_said(tmp_path: Path) -> None:
    # a folder without config.json: resolve is skipped and said; with a config.json that is not JSON it exits 2
    run = _profile(tmp_path / "none", tmp_path / "no-model")
    assert "resolve not timed" in run.stderr
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{")
    run = _profile(tmp_path / "broken-out", broken)
    assert "import_profile: resolve run 1 exited 2" in run.stderr
