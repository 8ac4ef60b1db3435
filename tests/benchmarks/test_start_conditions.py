"""benchmarks.e2e.start_conditions: the baked-start goal over alternating starts, each beside the CPU probe."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from benchmarks.e2e import start_conditions, start_rows

T0 = 1796308000.0  # 2026-12-03 14:26:40 UTC
RAW_12_03C = Path(__file__).parents[2] / "benchmarks/results/e2e"


def _row(mode: str, start_s: float | None, launched: float | None, status: str = "ok") -> dict:
    return {"model": "qwen3", "backend": "plan", "mode": mode, "status": status, "start_s": start_s,
            "launched_at_epoch_s": launched}  # fmt: skip


@pytest.fixture
def step(tmp_path: Path) -> Path:
    """A qwen-start step: empty, warm, layer (on a slow core), then one (warm 2, layer 2) pair on the usual one."""
    starts = [("empty", 130.0, T0), ("warm", 50.0, T0 + 200), ("warm-spawn", 90.0, T0 + 300),
              ("layer", 72.0, T0 + 500), ("warm 2", 55.0, T0 + 600), ("layer 2", 56.0, T0 + 700),
              ("layer 3", None, None, "timeout")]  # fmt: skip
    start_rows.append_start_rows([_row(*s) for s in starts], tmp_path / "start_breakdown.csv")
    slow = range(500, 572)  # the first layer start ran while the probe took 8 ms instead of 5
    probe = [f"{T0 + s:.3f},{8.0 if s in slow else 5.0}" for s in range(0, 800, 2)]
    (tmp_path / "cpu_probe.csv").write_text("\n".join(["epoch_s,probe_ms", *probe]) + "\n")
    cpu = ["epoch_s,user,nice,system,idle,iowait,irq,softirq,steal,load1,running,mean_mhz"]
    for s in range(0, 800):  # one of 16 cores busy throughout (jiffies: 100 a second across the host)
        cpu.append(f"{T0 + s:.3f},{s * 100 // 16},0,0,{s * 100 * 15 // 16},0,0,0,0,1.00,2,2100")
    (tmp_path / "host_cpu.csv").write_text("\n".join(cpu) + "\n")
    return tmp_path


def test_the_goal_is_read_over_every_warm_and_layer_start_and_each_start_gets_its_probe(step: Path) -> None:
    out = step / "start_conditions.csv"
    code = start_conditions.main([str(step / "start_breakdown.csv"), "--cpu-probe", str(step / "cpu_probe.csv"),
                                  "--host-cpu", str(step / "host_cpu.csv"), "--out", str(out),
                                  "--png", str(step / "s.png")])  # fmt: skip
    assert code == 0
    reading = start_conditions.goal_reading(start_rows.read_start_rows(step / "start_breakdown.csv"))
    # warm-spawn is another start method and the timed-out layer start has no time: neither is in the goal
    assert reading.warm == (50.0, 55.0) and reading.layer == (72.0, 56.0)
    assert reading.ratio == pytest.approx(64.0 / 52.5)
    assert reading.span == pytest.approx((56.0 / 55.0, 72.0 / 50.0))
    assert "not met (goal <= 1.2)" in reading.line()
    rows = {r["mode"]: r for r in csv.DictReader(out.open())}
    assert float(rows["layer"]["probe_vs_step"]) == pytest.approx(1.6)
    assert float(rows["layer 2"]["probe_vs_step"]) == pytest.approx(1.0)
    assert float(rows["warm"]["busy_cores_mean"]) == pytest.approx(1.0, abs=0.05)
    assert rows["layer 3"]["probe_ms_median"] == ""
    assert (step / "s.png").stat().st_size > 10_000


def test_a_goal_within_1_2_is_met_and_too_few_starts_are_not_read() -> None:
    met = start_conditions.goal_reading([_row("warm", 50.0, None), _row("layer", 59.0, None)])
    assert met.ratio == pytest.approx(1.18) and met.line().endswith("met (goal <= 1.2)")
    alone = start_conditions.goal_reading([_row("warm", 50.0, None), _row("layer", None, None, "failed")])
    assert alone.ratio is None and alone.line().startswith("goal: not readable (1 warm and 0 layer")


def test_a_breakdown_without_launch_times_is_still_read(tmp_path: Path) -> None:
    """2026-12-03c's breakdown, as filed before starts carried their launch time."""
    out = tmp_path / "c.csv"
    assert start_conditions.main([str(RAW_12_03C / "start_breakdown_2026-12-03c.csv"), "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["mode"] for r in rows] == ["empty", "warm", "layer"] and all(not r["probe_ms_median"] for r in rows)


def test_missing_files_and_bad_core_counts_are_refused(step: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = step / "nope.csv"
    assert start_conditions.main([str(step / "start_breakdown.csv"), "--cpu-probe", str(missing),
                                  "--out", str(step / "o.csv")]) == 2  # fmt: skip
    assert f"{missing}: no such file" in capsys.readouterr().err
    assert start_conditions.main([str(step / "start_breakdown.csv"), "--cores", "0", "--out", str(step / "o.csv")]) == 2
    assert "--cores 0: accepted: a whole number >= 1" in capsys.readouterr().err
