"""benchmarks.kernels.dispatch_table: the committed kernels/fused_moe_dispatch.json is what the command makes from
the committed H200 CSV, and its rule (a margin over ties, ranges only between winning neighbours) holds."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from benchmarks.kernels.dispatch_table import DEFAULT_CSV, build_table, main, token_ranges
from benchmarks.paths import KERNEL_RESULTS
from kernels.dispatch import DISPATCH_FILE, DispatchTable

# The 2026-11-30 run: before the PDL rule and without the shared-routing columns, so it exercises the paths a CSV
# of that kind takes (the PDL column, vLLM's M = 1 time as the floor). The 2026-12-01d run (vLLM 0.26) has both
# columns but no hot-routing ones: the all-shared rule. DEFAULT_CSV (2026-12-04, vLLM 0.32) adds the hot columns.
PRE_SHARED_CSV = KERNEL_RESULTS / "h200_fused_moe_2026-11-30b.csv"
SHARED_CSV = KERNEL_RESULTS / "h200_fused_moe_2026-12-01d.csv"


def test_the_committed_table_is_what_the_command_makes_from_the_committed_csv() -> None:
    assert main(["--check"]) == 0


def test_ranges_merge_winning_neighbours_only() -> None:
    grid = [(1, True), (2, False), (4, False), (8, True), (16, True), (32, False)]
    assert token_ranges(grid) == [[1, 1], [8, 16]]
    assert token_ranges([(1, False)]) == []


def test_a_tie_inside_the_margin_keeps_vllms_kernel() -> None:
    table = build_table(PRE_SHARED_CSV, 1.03)
    qwen = next(r for r in table["rows"] if r["shape"] == "qwen3-30b-a3b:tp1")
    at = {row["m"]: row["speedup"] for row in qwen["measured"]}
    assert 1.0 < at[2] < 1.03 and at[1] > 1.3  # M = 2 measured 1.006x: a tie, not a win
    assert qwen["token_ranges"] == [[1, 1]]  # M = 8 wins only with uniform routing (below)
    mixtral = next(r for r in table["rows"] if r["shape"] == "mixtral-8x7b:tp1")
    assert mixtral["token_ranges"] == [] and all(row["speedup"] < 1.03 for row in mixtral["measured"])


def test_the_shipped_row_of_a_pre_rule_csv_is_the_pdl_column_where_the_rule_turns_pdl_on() -> None:
    rows = {(r["shape"], r["M"]): r for r in csv.DictReader(PRE_SHARED_CSV.open())}
    table = build_table(PRE_SHARED_CSV, 1.03)
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


def test_an_m_above_one_must_also_beat_vllms_time_at_m1_whatever_the_routing() -> None:
    table = build_table(PRE_SHARED_CSV, 1.03)
    by_shape = {r["shape"]: r for r in table["rows"]}
    qwen = {row["m"]: row for row in by_shape["qwen3-30b-a3b:tp1"]["measured"]}
    # 1.08x with uniform routing, but 73 µs against vLLM's 24 µs at M = 1: lost 22 % served (2026-12-01c)
    assert qwen[8]["speedup"] > 1.03 and qwen[8]["speedup_if_shared"] < 0.5
    assert qwen[1]["speedup_if_shared"] == qwen[1]["speedup"]
    # Llama-4-Maverick is top-1: two tokens through our kernel (16.7 µs) still beat one through vLLM's (21.7 µs)
    maverick = {row["m"]: row for row in by_shape["llama-4-maverick:tp8"]["measured"]}
    assert maverick[2]["speedup_if_shared"] > 1.03 and maverick[4]["speedup"] > 1.03 > maverick[4]["speedup_if_shared"]
    assert by_shape["llama-4-maverick:tp8"]["token_ranges"] == [[1, 2]]
    assert by_shape["nemotron-3-nano-30b-a3b:tp1"]["token_ranges"] == [[1, 1]]


def test_a_csv_without_hot_columns_keeps_the_measured_all_shared_rule() -> None:
    by_shape = {r["shape"]: r for r in build_table(SHARED_CSV, 1.03)["rows"]}
    deepseek = {row["m"]: row for row in by_shape["deepseek-v3:tp8"]["measured"]}
    # DeepSeek-V3 TP8 M = 2: 1.04x uniform; its measured shared time (1.12x) passes where vLLM's M = 1 floor had not
    assert deepseek[2]["speedup"] > 1.03 and deepseek[2]["speedup_if_shared"] > 1.1
    assert by_shape["deepseek-v3:tp8"]["token_ranges"] == [[1, 2]]
    qwen = {row["m"]: row for row in by_shape["qwen3-30b-a3b:tp1"]["measured"]}
    # Qwen3 M = 8: 1.08x uniform, 0.54x with shared routing (vLLM 29.5 µs against ours 54.9): vLLM's kernel stays
    assert qwen[8]["speedup"] > 1.03 and qwen[8]["speedup_if_shared"] < 0.6
    assert by_shape["qwen3-30b-a3b:tp1"]["token_ranges"] == [[1, 1]]


def _write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for row in rows for k in row)), restval="")
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_without_an_m1_row_no_m_above_one_gets_our_kernel(tmp_path: Path) -> None:
    rows = [r for r in csv.DictReader(PRE_SHARED_CSV.open()) if r["shape"] == "llama-4-maverick:tp8" and r["M"] != "1"]
    (row,) = build_table(_write_csv(tmp_path / "no_m1.csv", rows), 1.03)["rows"]
    assert row["token_ranges"] == [] and any(m["speedup"] > 1.03 for m in row["measured"])


@pytest.mark.parametrize(("vllm_shared_us", "ranges"), [(60.0, [[1, 1], [8, 8]]), (30.0, [[1, 1]])])
def test_measured_shared_routing_replaces_the_m1_floor(tmp_path: Path, vllm_shared_us: float, ranges: list) -> None:
    rows = [r for r in csv.DictReader(PRE_SHARED_CSV.open()) if r["shape"] == "qwen3-30b-a3b:tp1"]
    for row in rows:  # a bench CSV with the shared-routing columns (bench_fused_moe since 2026-12-01c)
        row["ours_shared_us"], row["vllm_shared_us"] = ("54.88", str(vllm_shared_us)) if row["M"] == "8" else ("", "")
    (row,) = build_table(_write_csv(tmp_path / "shared.csv", rows), 1.03)["rows"]
    assert row["token_ranges"] == ranges
    at8 = next(m for m in row["measured"] if m["m"] == 8)
    assert at8["speedup_if_shared"] == round(vllm_shared_us / 54.88, 3)


def test_the_margin_alone_can_keep_vllms_kernel(tmp_path: Path) -> None:
    # M = 2 wins the shared test clearly, so only the uniform speedup (1.02x) against the 1.03 margin decides
    maverick = [r for r in csv.DictReader(SHARED_CSV.open()) if r["shape"] == "llama-4-maverick:tp8"]
    rows = [r for r in maverick if r["M"] in ("1", "2")]
    at2 = next(r for r in rows if r["M"] == "2")
    at2.update(ours_us="10.0", ours_pdl_us="10.0", vllm_us="10.2", ours_shared_us="10.0", vllm_shared_us="20.0")
    path = _write_csv(tmp_path / "margin.csv", rows)
    assert build_table(path, 1.03)["rows"][0]["token_ranges"] == [[1, 1]]
    assert build_table(path, 1.0)["rows"][0]["token_ranges"] == [[1, 2]]


@pytest.mark.parametrize(("vllm_hot_us", "ranges"), [(57.0, [[1, 1], [8, 8]]), (50.0, [[1, 1]])])
def test_measured_hot_routing_replaces_the_collapsed_case(tmp_path: Path, vllm_hot_us: float, ranges: list) -> None:
    # Qwen3 M = 8 of the 2026-12-01d CSV: 1.08x uniform and 0.54x all-shared (the dummy weights' collapsed routing).
    # With the hot-routing columns (issue 31) the all-shared time no longer decides: M = 8 is ours when it also wins
    # under a few hot experts (57.0 / 54.88 = 1.039), vLLM's when it does not (50.0 / 54.88 = 0.911)
    rows = [r for r in csv.DictReader(SHARED_CSV.open()) if r["shape"] == "qwen3-30b-a3b:tp1"]
    for row in rows:
        row["ours_hot_us"], row["vllm_hot_us"] = ("54.88", str(vllm_hot_us)) if row["M"] == "8" else ("", "")
    at8_csv = next(r for r in rows if r["M"] == "8")
    assert float(at8_csv["vllm_shared_us"]) / float(at8_csv["ours_shared_us"]) < 0.6
    table = build_table(_write_csv(tmp_path / "hot.csv", rows), 1.03)
    (row,) = table["rows"]
    assert row["token_ranges"] == ranges
    at8 = next(m for m in row["measured"] if m["m"] == 8)
    assert at8["speedup_if_hot"] == round(vllm_hot_us / 54.88, 3) and at8["speedup_if_shared"] < 0.6
    # an M whose hot time was not measured never gets our kernel, and the table says which rule made it
    assert all("speedup_if_hot" not in m for m in row["measured"] if m["m"] not in (1, 8))
    assert "a few hot experts per layer" in table["about"]


def test_the_shipped_table_takes_the_worse_of_uniform_and_hot_routing_of_the_committed_csv() -> None:
    # The 2026-12-04 H200 run (vLLM 0.32, Triton 3.7.1) timed a few hot experts per layer at 1 < M <= 16
    table = build_table(DEFAULT_CSV, 1.03)
    by_shape = {r["shape"]: r for r in table["rows"]}
    assert "a few hot experts per layer" in table["about"]
    maverick = {row["m"]: row for row in by_shape["llama-4-maverick:tp8"]["measured"]}
    # Maverick M = 4: 1.04x uniform and hot; the all-shared case (0.98x) no longer keeps it from our kernel
    assert min(maverick[4]["speedup"], maverick[4]["speedup_if_hot"]) > 1.03 > maverick[4]["speedup_if_shared"]
    assert by_shape["llama-4-maverick:tp8"]["token_ranges"] == [[1, 4]]
    qwen = {row["m"]: row for row in by_shape["qwen3-30b-a3b:tp1"]["measured"]}
    # Qwen3 M = 8: 1.06x uniform, but under 1.03 with hot experts: vLLM's kernel stays
    assert qwen[8]["speedup"] > 1.03 > qwen[8]["speedup_if_hot"]
    assert by_shape["qwen3-30b-a3b:tp1"]["token_ranges"] == [[1, 1]]
    # the bench times hot routing up to M = 16 only: above it there is no hot entry, and no M above 16 is ours
    assert all("speedup_if_hot" not in row for row in qwen.values() if row["m"] > 16)
