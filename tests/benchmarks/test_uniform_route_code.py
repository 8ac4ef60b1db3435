"""benchmarks.kernels.uniform_route_code on this machine (no GPU): every one-launch routing variant compiles for sm_90
with the image's Triton (3.7.1, tests/triton_aot.py), and the engine's sampler stays short.

Why the length is guarded: the first sampler's 6,032 instructions, all run once, are the lead for its 20.4 µs per
launch (benchmarks/e2e/uniform_route.py); the engine's routing must not grow back into that while the H200 has not
yet settled the question."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

from tests import triton_aot
from tests.conftest_paths import REPO

COMMAND = (sys.executable, "-m", "benchmarks.kernels.uniform_route_code")


def _count(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*COMMAND, "--out", str(tmp_path), *args], env=triton_aot.env(tmp_path / "cache"), cwd=REPO,
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def test_every_variant_compiles_and_the_engines_sampler_is_a_tenth_of_the_first(tmp_path: Path) -> None:
    from benchmarks.kernels.bench_uniform_route import VARIANTS

    proc = _count(tmp_path, "--shapes", "128:8")
    assert proc.returncode == 0, proc.stderr[-4000:]
    with open(tmp_path / "cpu_uniform_route_code.csv") as f:
        rows = {row["variant"]: row for row in csv.DictReader(f)}
    assert set(rows) == {v for v, kwargs in VARIANTS.items() if kwargs is not None}
    assert {row["triton"] for row in rows.values()} == {triton_aot.TRITON_VERSION}
    assert all(int(row["registers"]) > 0 and int(row["stack_bytes"]) == 0 for row in rows.values())
    first, engine = int(rows["topk_tile"]["instructions"]), int(rows["floyd"]["instructions"])
    assert first > 5_000 and engine * 10 < first, (first, engine)
    assert float(rows["floyd"]["code_kib"]) == round(engine * 16 / 1024, 1)
    assert "| 128 / 8 | floyd |" in (tmp_path / "cpu_uniform_route_code.md").read_text()


def test_the_interpreter_is_refused_with_exit_code_2(tmp_path: Path) -> None:
    env = {**triton_aot.env(tmp_path / "cache"), "TRITON_INTERPRET": "1"}
    proc = subprocess.run([*COMMAND, "--shapes", "8:2", "--out", str(tmp_path)], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 2 and "TRITON_INTERPRET is set" in proc.stderr
    assert not (tmp_path / "cpu_uniform_route_code.csv").exists()
