"""benchmarks.kernels.dispatch_table: the committed kernels/fused_moe_dispatch.json is what the command makes from
the committed H200 CSV, and its rule (a margin over ties, ranges only between winning neighbours) holds."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from benchmarks.kernels.dispatch_table import DEFAULT_CSV, build_table, main, token_ranges
from kernels.dispatch import DISPATCH_FILE, DispatchTable


def test_the_committed_table_is_what_the_command_makes_from_the_committed_csv() -> None:
    assert main(["--check"]) == 0


def test_ranges_merge_winning_neighbours_only() -> None:
    grid = [(1, True), (2, False), (4, False), (8, True), (16, True), (32, False)]
    assert token_ranges(grid) == [[1, 1], [8, 16]]
    assert token_ranges([(1, False)]) == []


def test_a_tie_inside_the_margin_keeps_vllms_kernel() -> None:
    table = build_table(DEFAULT_CSV, 1.03)
    qwen = next(r for r in table["rows"] if r["shape"] == "qwen3-30b-a3b:tp1")
    at = {row["m"]: row["speedup"] for row in qwen["measured"]}
    assert 1.0 < at[2] < 1.03 and at[1] > 1.3  # M = 2 measured 1.006x: a tie, not a win
    assert qwen["token_ranges"] == [[1, 1], [8, 8]]
    mixtral = next(r for r in table["rows"] if r["shape"] == "mixtral-8x7b:tp1")
    assert mixtral["token_ranges"] == [] and all(row["speedup"] < 1.03 for row in mixtral["measured"])


def test_the_shipped_row_of_a_pre_rule_csv_is_the_pdl_column_where_the_rule_turns_pdl_on() -> None:
    rows = {(r["shape"], r["M"]): r for r in csv.DictReader(DEFAULT_CSV.open())}
    table = build_table(DEFAULT_CSV, 1.03)
    qwen = next(r for r in table["rows"] if r["shape"] == "qwen3-30b-a3b:tp1")
    m1 = next(row for row in qwen["measured"] if row["m"] == 1)
    assert m1["ours_us"] == round(float(rows[("qwen3-30b-a3b:tp1", "1")]["ours_pdl_us"]), 2)  # 16 MB rule: on
    m2 = next(row for row in qwen["measured"] if row["m"] == 2)
    assert m2["ours_us"] == round(float(rows[("qwen3-30b-a3b:tp1", "2")]["ours_us"]), 2)  # 25 MB: off


def test_a_margin_below_one_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--min-speedup", "0.9", "--check"])
    assert caught.value.code == 2 and "--min-speedup=0.9: must be >= 1.0" in capsys.readouterr().err


def test_a_stale_table_fails_the_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "table.json"
    stale.write_text(DISPATCH_FILE.read_text().replace('"min_speedup": 1.03', '"min_speedup": 1.05'))
    assert main(["--check", "--out", str(stale)]) == 1
    assert "differs from what" in capsys.readouterr().out
    assert DispatchTable.load().rows  # the shipped one parses and has rows
