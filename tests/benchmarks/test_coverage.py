"""benchmarks.e2e.coverage: which of issue 31's served cells have a publishable H200 row."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from benchmarks.e2e import coverage
from tests.conftest_paths import REPO

FIELDS = ["model", "split", "backend", "routing", "input_len", "conc", "status", "floor_check", "vllm", "gpu",
          "timestamp"]  # fmt: skip
QWEN = "qwen3-30b-a3b-fp8-static"


def row(**over: str) -> dict[str, str]:
    base = {"model": QWEN, "split": "tp1", "backend": "plan", "routing": "uniform_one_launch", "input_len": "512",
            "conc": "1", "status": "ok", "floor_check": "pass", "vllm": "0.32.0", "gpu": "NVIDIA H200",
            "timestamp": "2026-12-07T12:56:50+0000"}  # fmt: skip
    return base | over


def write(path: Path, rows: list[dict[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)


def cells(results: Path) -> dict[tuple[str, int, int], str]:
    rows = list(coverage.measured_rows(sorted(results.rglob("*.csv")), "0.32.0"))
    return {(m.engine, m.input_len, m.conc): coverage.cell([m]) for m in rows}


def test_only_publishable_rows_of_the_images_engine_fill_a_cell(tmp_path: Path) -> None:
    write(tmp_path / "e2e" / "routing_2026-12-07c" / "qwen.csv", [
        row(),
        row(conc="2", floor_check="BELOW_FLOOR"),  # under its HBM floor: never published
        row(conc="4", routing="dummy"),  # the control
        row(conc="8", vllm="0.26.0"),
        row(conc="16", status="skipped_budget"),
        row(conc="32", backend="plan_pdl"),  # not one of the three engines
        row(conc="64", split="tp2"),
    ])  # fmt: skip
    write(tmp_path / "e2e" / "h100_2026-12-06b" / "qwen.csv", [row(conc="128", gpu="NVIDIA H100 80GB HBM3")])
    assert cells(tmp_path) == {("plan", 512, 1): "12-07c", ("plan", 512, 128): "(12-06b H100)"}


def test_an_h200_row_outranks_an_h100_one_and_the_newest_run_names_the_cell() -> None:
    found = [
        coverage.Measured(QWEN, "plan", 512, 1, "H100", "2026-12-07d"),
        coverage.Measured(QWEN, "plan", 512, 1, "H200", "2026-12-04"),
        coverage.Measured(QWEN, "plan", 512, 1, "H200", "2026-12-05b"),
    ]
    assert coverage.cell(found) == "12-05b"
    assert coverage.cell([]) == "–"


def test_the_run_is_named_by_its_folder_else_its_file_else_its_date() -> None:
    assert coverage.run_name(Path("e2e/routing_2026-12-07c/x.csv"), "") == "2026-12-07c"
    assert coverage.run_name(Path("e2e/h200_e2e_2026-12-01d.csv"), "") == "2026-12-01d"
    assert coverage.run_name(Path("e2e/x.csv"), "2026-12-03T01:02:03+0000") == "2026-12-03"


def test_the_gap_list_counts_only_the_cells_the_issue_asks_for(tmp_path: Path) -> None:
    write(tmp_path / "e2e" / "routing_2026-12-07c" / "qwen.csv", [
        row(backend=engine, conc=str(c)) for engine in coverage.ENGINES for c in coverage.CONCURRENCIES
    ] + [row(backend="auto", input_len="4096", conc="8")])  # fmt: skip
    rows = list(coverage.measured_rows(sorted(tmp_path.rglob("*.csv")), "0.32.0"))
    gaps = coverage.missing_on_h200(rows, [QWEN])
    # 4096 × 8 is shown, not asked for; 4096 × 1 is asked for and missing for every engine
    assert gaps == [f"{QWEN} {name} 1x4096" for name in coverage.ENGINES.values()]
    assert "8 × 4096 in" in coverage.coverage_table(rows)


def test_the_command_reads_the_repositorys_results_and_names_the_issues_models(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "coverage.md"
    assert coverage.main(["--results", str(REPO / "benchmarks" / "results"), "--out", str(out)]) == 0
    text = out.read_text()
    assert all(f"### {model}" in text for model in coverage.ISSUE_MODELS)
    assert "cells it asks for" in capsys.readouterr().out


def test_a_missing_results_folder_is_refused_with_its_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert coverage.main(["--results", str(tmp_path / "nope")]) == 2
    assert "--results" in capsys.readouterr().err
