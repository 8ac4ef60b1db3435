"""benchmarks/e2e/floor_rows.py: every row is checked against the HBM floor of its routing, and a row under it is
flagged in the CSV and never published in the table (issue 31)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.e2e import floor_rows, report
from benchmarks.e2e.spec import resolve_model_dir

QWEN3 = resolve_model_dir("qwen3-30b-a3b-fp8-static")
H200_READ = 4.08e12  # bytes/s: the bandwidth the 2026-12 floors were quoted at


def _row(conc: int, tpot_ms: float, routing: str = "uniform_random", **extra: Any) -> dict[str, Any]:
    return {"model": "qwen3-30b-a3b-fp8-static", "backend": "plan", "input_len": 512, "output_len": 256,
            "conc": conc, "tpot_ms_median": tpot_ms, "decode_tps_best": conc * 1000 / tpot_ms,
            "decode_tps_median": conc * 1000 / tpot_ms, "spread_pct": 0.5, "status": "ok", "routing": routing,
            **extra}  # fmt: skip


def test_the_collapsed_row_is_under_the_floor_and_the_uniform_one_above_it(tmp_path: Path) -> None:
    # 2026-12-01d published 5.71 ms at 64 from dummy routing; the uniform_random re-run measured 11.74 ms
    rows = [_row(64, 5.71), _row(64, 11.74), _row(1, 3.4)]
    floor_rows.add_floor_checks(rows, QWEN3, "uniform_random", H200_READ)
    assert [r["floor_check"] for r in rows] == [floor_rows.BELOW_FLOOR, "pass", "pass"]
    assert rows[0]["floor_fraction"] > 1 > rows[1]["floor_fraction"] > 0.5
    assert rows[0]["floor_tpot_ms"] == pytest.approx(8.4, abs=0.2)  # experts ~28.5 GB + KV + dense
    assert rows[2]["hbm_read_tbps"] == pytest.approx(4.08)
    # the CSV keeps the flag; the table shows no figure of the flagged row and says why
    path = tmp_path / "h200_e2e.csv"
    report.write_csv(rows, path)
    back = report.read_csv(path)
    assert [r["floor_check"] for r in back] == [floor_rows.BELOW_FLOOR, "pass", "pass"]
    lines = report.markdown_table(back).splitlines()[2:5]
    assert "below the HBM floor: not published" in lines[0] and "5.71" not in lines[0] and "11206" not in lines[0]
    assert "11.74" in lines[1] and "not published" not in lines[1]


def test_the_floor_follows_the_routing_the_row_ran() -> None:
    uniform, dummy = [_row(64, 6.0)], [_row(64, 6.0, routing="dummy")]
    floor_rows.add_floor_checks(uniform, QWEN3, "uniform_random", H200_READ)
    floor_rows.add_floor_checks(dummy, QWEN3, "dummy", H200_READ)
    assert uniform[0]["floor_check"] == floor_rows.BELOW_FLOOR and dummy[0]["floor_check"] == "pass"
    assert floor_rows.publication(dummy[0]) == (True, "control (dummy routing): not published")
    assert floor_rows.publication({**dummy[0], "conc": 1}) == (True, "")


def test_an_fp8_kv_cache_lowers_the_floor() -> None:
    bf16, fp8 = [_row(64, 20.0)], [_row(64, 20.0, options="kv_cache_dtype=fp8")]
    floor_rows.add_floor_checks(bf16, QWEN3, "uniform_random", H200_READ)
    floor_rows.add_floor_checks(fp8, QWEN3, "uniform_random", H200_READ)
    assert fp8[0]["floor_tpot_ms"] < bf16[0]["floor_tpot_ms"]


def test_no_bandwidth_or_no_geometry_leaves_the_floor_empty_and_says_why(tmp_path: Path) -> None:
    rows = [_row(8, 4.0)]
    floor_rows.add_floor_checks(rows, QWEN3, "uniform_random", None)
    assert "floor_tpot_ms" not in rows[0] and rows[0]["floor_check"].startswith("no floor")
    (tmp_path / "config.json").write_text('{"model_type": "qwen3_moe"}')
    floor_rows.add_floor_checks(rows, tmp_path, "uniform_random", H200_READ)
    assert rows[0]["floor_check"].startswith("no floor: ")
    assert floor_rows.single_gpu("tp1") and not floor_rows.single_gpu("tp8ep8")


def test_the_bandwidth_is_not_made_up_where_no_gpu_answers() -> None:
    value, line = floor_rows.measure_bandwidth({"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"}, timeout_s=120)
    assert value is None and line.startswith("HBM read bandwidth: not measured")
    assert "No module named" not in line  # the probe itself ran, and failed where the GPU is missing


def test_the_floor_plot_draws_a_run_and_refuses_a_baseline_it_lacks(tmp_path: Path) -> None:
    from benchmarks.e2e import floor_plot

    rows = [_row(c, t) for c, t in ((1, 4.0), (64, 12.5))] + [
        {**_row(c, t), "backend": "triton"} for c, t in ((1, 4.1), (64, 12.3))
    ]
    floor_rows.add_floor_checks(rows, QWEN3, "uniform_random", H200_READ)
    csv_path, png = tmp_path / "run.csv", tmp_path / "run.png"
    report.write_csv(rows, csv_path)
    assert floor_plot.main([str(csv_path), "--png", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(SystemExit) as exc:
        floor_plot.main([str(csv_path), "--baseline", "auto", "--png", str(png)])
    assert exc.value.code == 2


@pytest.mark.parametrize(
    ("ratio", "spreads", "beyond"),
    [
        (1.042, (0.2, 0.1), True),  # Qwen3 at 4 (2026-12-04): bold
        (1.021, (0.2, 3.0), False),  # Qwen3 at 64: inside LMI-equivalent's 3 % spread
        (0.844, (20.2, 0.4), False),  # Nemotron's plan at 128 (2026-12-04b): a 20 % spread, not a 16 % loss
        (1.008, (0.1, 0.1), False),  # inside 1 %
        (0.95, (1.0, 2.0), True),
    ],
)
def test_a_ratio_is_called_a_difference_only_beyond_both_spreads(ratio: float, spreads: tuple, beyond: bool) -> None:
    from benchmarks.e2e.floor_plot import beyond_spreads

    assert beyond_spreads(ratio, *spreads) is beyond


def test_a_merged_csv_counts_its_runs_by_their_hbm_probe() -> None:
    from benchmarks.e2e.floor_plot import runs_in

    assert runs_in([{"hbm_read_tbps": 4.4}, {"hbm_read_tbps": 4.4}]) == 1
    assert runs_in([{"hbm_read_tbps": 4.4}, {"hbm_read_tbps": 4.24}]) == 2  # tuned_2026-12-04c/glm.csv


def test_a_run_without_auto_is_drawn_against_its_floor_not_as_empty_axes(tmp_path: Path) -> None:
    # 2026-12-07 (tuned-phi: the plan and Triton only): report.plot wrote a PNG with no line on it
    from benchmarks.e2e import floor_plot

    rows = [_row(c, t) for c, t in ((1, 4.0), (64, 12.5))] + [
        {**_row(c, t), "backend": "triton"} for c, t in ((1, 5.1), (64, 16.3))
    ]
    floor_rows.add_floor_checks(rows, QWEN3, "uniform_random", H200_READ)
    report.add_ratios(rows)
    empty, drawn = tmp_path / "empty.png", tmp_path / "run.png"
    assert not report.plot(rows, empty) and not empty.exists()
    assert floor_plot.plot_run(rows, drawn) and drawn.read_bytes()[:4] == b"\x89PNG"
    assert floor_plot.plot_run(rows[:2], tmp_path / "one.png")  # one backend: its TPOT over the floor alone
    assert not floor_plot.plot_run([{**r, "status": "skipped_budget"} for r in rows], tmp_path / "none.png")
