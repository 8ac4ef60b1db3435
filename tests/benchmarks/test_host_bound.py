"""The host-bound flag on e2e rows (benchmarks/e2e/host_bound.py): a row whose busiest engine thread held a core is
marked in the CSV, the table and the ratio's verdict; a GPU-bound row and a row without the meter are not."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.e2e import backends as be
from benchmarks.e2e import host_bound, logparse, report, runner, spec


def _event(conc: int, wall_s: float, thread_s: float | None, rep: int) -> dict:
    requests = [
        {"num_output_tokens": 256, "ttft_s": 0.1, "first_token_ts": 10.0, "last_token_ts": 10.0 + wall_s - 0.1}
        for _ in range(conc)
    ]
    event = {"event": "sample", "rep": rep, "input_len": 512, "output_len": 256, "conc": conc, "wall_s": wall_s,
             "requests": requests, "output_tokens": 256 * conc}  # fmt: skip
    if thread_s is not None:
        event["engine_top_thread_cpu_s"] = thread_s
    return event


def _rows(thread_share: dict[str, float | None]) -> list[dict]:
    """One row per backend at one request, two repetitions; thread_share: the busiest thread's share of the wall."""
    common = {"model": "nemotron", "layers": 52, "layers_real": 52, "workloads": [spec.Workload(512, 256, 1)],
              "compile_mode": "default", "timestamp": "t", "warm_start_s": None}  # fmt: skip
    rows: list[dict] = []
    for backend, wall in (("auto", 1.2), ("plan", 1.0)):
        share = thread_share[backend]
        samples = [_event(1, w, None if share is None else share * w, rep) for rep, w in enumerate((wall, wall * 1.01))]
        result = runner.JobResult(status="ok", start_s=90.0, versions={"gpu": "NVIDIA H200"}, samples=samples,
                                  log=logparse.parse_engine_log(""))  # fmt: skip
        rows += report.build_rows(setup=be.EngineSetup(backend, None), result=result, **common)
    report.add_ratios(rows)
    return rows


def test_a_row_whose_engine_thread_held_a_core_is_flagged_in_csv_table_and_verdict(tmp_path: Path) -> None:
    # 2026-12-06's Nemotron rows at one request: the engine's busiest thread at 98 % of a core
    rows = _rows({"auto": 0.98, "plan": 0.985})
    plan = next(r for r in rows if r["backend"] == "plan")
    assert plan["engine_thread_pct"] == pytest.approx(98.5)
    assert plan["host_bound"] == "yes"
    assert plan["verdict_vs_auto"] == "faster (host-bound)"
    path = tmp_path / "rows.csv"
    report.write_csv(rows, path)
    back = report.read_csv(path)
    assert [r["host_bound"] for r in back] == ["yes", "yes"]
    assert back[1]["engine_thread_pct"] == pytest.approx(98.5)
    table = report.markdown_table(back)
    assert "| ok; host-bound (engine thread 98 % of a core) |" in table


def test_a_gpu_bound_row_is_not_flagged() -> None:
    # Qwen3's rows at 16-128 requests (2026-12-06): the busiest thread at 41-56 % of a core
    rows = _rows({"auto": 0.50, "plan": 0.56})
    assert [r["host_bound"] for r in rows] == ["no", "no"]
    assert next(r for r in rows if r["backend"] == "plan")["verdict_vs_auto"] == "faster"
    assert "host-bound" not in report.markdown_table(rows)


def test_one_host_bound_side_marks_the_ratio() -> None:
    rows = _rows({"auto": 0.97, "plan": 0.60})
    plan = next(r for r in rows if r["backend"] == "plan")
    assert plan["host_bound"] == "no"
    assert plan["verdict_vs_auto"].endswith(" (host-bound)")


def test_rows_without_the_meter_say_nothing() -> None:
    rows = _rows({"auto": None, "plan": None})
    assert [(r["engine_thread_pct"], r["host_bound"]) for r in rows] == [(None, ""), (None, "")]
    assert host_bound.engine_thread_pct([{"engine_top_thread_cpu_s": 0, "wall_s": 1.0}]) is None  # no thread read


def test_the_threshold_is_a_median_over_repetitions() -> None:
    events = [{"engine_top_thread_cpu_s": s, "wall_s": 1.0} for s in (0.99, 0.94, 0.96)]
    assert host_bound.engine_thread_pct(events) == pytest.approx(96.0)
    assert host_bound.columns(events)["host_bound"] == "yes"
    assert host_bound.columns(events[1:2])["host_bound"] == "no"
