"""benchmarks.kernels.pair_scan_crossover: which of our kernel's two modes would pass the dispatch table's rule."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from benchmarks.kernels import pair_scan_crossover as psc

COLUMNS = ("shape", "M", "mode", "ours_pair_us", "ours_pair_shared_us", "ours_scan_us", "ours_scan_shared_us",
           "vllm_us", "vllm_shared_us")  # fmt: skip


def write(path: Path, rows: list[tuple]) -> Path:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        w.writerows(rows)
    return path


def test_a_mode_passes_only_when_it_beats_vllm_under_both_routings(tmp_path: Path) -> None:
    points = psc.read_points(write(tmp_path / "b.csv", [
        # PAIR 1.5x faster uniform but slower shared: neither passes (the M = 8 served loss in one row)
        ("a:tp1", 8, "PAIR", 20.0, 40.0, 50.0, 35.0, 30.0, 30.0),
        # SCAN passes both (1.2x, 1.5x); PAIR fails shared
        ("a:tp1", 16, "PAIR", 20.0, 60.0, 25.0, 20.0, 30.0, 30.0),
        # no shared columns: not evidence, skipped
        ("a:tp1", 32, "SCAN", 20.0, "", 25.0, "", 30.0, ""),
    ]))  # fmt: skip
    assert [p.m for p in points] == [8, 16]
    assert [(p.m, mode) for p, mode in psc.added_points(points, 1.03)] == [(16, "scan")]
    assert points[1].faster(0) == "pair" and points[1].faster(1) == "scan"
    text = psc.markdown(points, 1.03, "b.csv", {"a:tp1": [[1, 1]]})
    assert "| a:tp1 | 8 | PAIR |" in text and text.count("| neither |") == 1
    assert "a:tp1 M = 16 (SCAN, NOT in the shipped table)" in text
    # the shipped mode (PAIR) is the slower one under uniform routing at neither M: nothing reported
    assert "picks the slower mode under uniform routing: nowhere." in text


def test_a_shipped_mode_slower_than_the_other_is_named(tmp_path: Path) -> None:
    points = psc.read_points(write(tmp_path / "b.csv", [("b:tp1", 4, "SCAN/M=16", 28.7, 22.5, 31.5, 17.8, 24.4, 11.3)]))
    text = psc.markdown(points, 1.03, "b.csv", {})
    assert "b:tp1 M = 4 (SCAN: 31.5 µs, PAIR: 28.7)" in text
    assert "Where either mode passes: nowhere." in text


def test_a_csv_without_the_mode_columns_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "old.csv"
    path.write_text("shape,M,ours_us,vllm_us\na:tp1,1,10,12\n")
    assert psc.main(["--csv", str(path), "--out", str(tmp_path / "o.md")]) == 2
    assert "ours_pair_us" in capsys.readouterr().err and not (tmp_path / "o.md").exists()


def test_the_committed_table_is_what_the_command_makes_from_the_committed_csv(tmp_path: Path) -> None:
    out = tmp_path / "h200_pair_scan.md"
    assert psc.main(["--out", str(out)]) == 0
    committed = psc.DEFAULT_OUT.read_text()
    # the source path is printed relative to the working directory; compare what follows it
    assert out.read_text().split("`", 2)[2] == committed.split("`", 2)[2]
