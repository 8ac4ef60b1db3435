"""benchmarks.e2e.rep_conditions: each sample joined with the GPU clocks and host CPU sampled beside its step."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from benchmarks.e2e import rep_conditions

T0 = 1796298160.0  # 2026-12-03 11:42:40 UTC
RAW_MIXTRAL = Path(__file__).parents[2] / "benchmarks/results/e2e/raw/2026-12-03b/e2e-mixtral"


def _stamp(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]


def _sample(rep: int, end: float, tpot_s: float, **host: float) -> dict:
    return {**host, "event": "sample", "t": end, "rep": rep, "input_len": 512, "output_len": 256, "conc": 1,
            "wall_s": 2.0, "requests": [{"num_output_tokens": 256, "ttft_s": 0.05, "first_token_ts": 100.0,
                          "last_token_ts": 100.0 + 255 * tpot_s}]}  # fmt: skip


# the slow sample's host meter (benchmarks/e2e/host_meter.py): its engine thread busy 98 % of the 2 s batch, the
# engine's own inter-token latency 3.7 ms; the fast sample predates the meter
SLOW_HOST = {"api_cpu_s": 0.5, "engine_cpu_s": 2.4, "engine_top_thread_cpu_s": 1.96, "server_itl_sum_s": 0.9435,
             "server_itl_count": 255}  # fmt: skip


@pytest.fixture
def step(tmp_path: Path) -> Path:
    """A step folder as run_queue.sh leaves it: one run (its raw JSON), the GPU clocks, the host's CPU."""
    run = tmp_path / "prefix-caching"
    run.mkdir()
    # rep 0 fast at full clock and no steal, rep 1 slow while the SM clock dropped and the host stole 40 %
    results = [{"backend": "plan", "options": "enable_prefix_caching=true",
                "samples": [_sample(0, T0 + 2, 0.0026), _sample(1, T0 + 6, 0.0037, **SLOW_HOST),
                            {"event": "warmup"}]}]  # fmt: skip
    (run / "h200_e2e_raw.json").write_text(json.dumps(results))
    gpu = ["timestamp, index, clocks.current.sm [MHz], clocks.current.memory [MHz], power.draw [W], "
           "temperature.gpu, utilization.gpu [%], clocks_event_reasons.active"]  # fmt: skip
    for s in range(9):
        sm, reasons = (1980, "0x0000000000000000") if s < 4 else (1410, "0x0000000000000004")
        gpu.append(f"{_stamp(T0 + s)}, 0, {sm} MHz, 3201 MHz, 400.00 W, 40, 90 %, {reasons}")
    (tmp_path / "gpu_clocks.csv").write_text("\n".join(gpu) + "\n")
    cpu = ["epoch_s,user,nice,system,idle,iowait,irq,softirq,steal,load1,running,mean_mhz"]
    user = idle = steal = 0
    for s in range(9):
        cpu.append(f"{T0 + s:.3f},{user},0,0,{idle},0,0,0,{steal},1.00,2,2600")
        slow = s >= 4  # per second: 10 of 100 jiffies busy, and from 4 s on 40 stolen
        user, idle, steal = user + 10, idle + (50 if slow else 90), steal + (40 if slow else 0)
    (tmp_path / "host_cpu.csv").write_text("\n".join(cpu) + "\n")
    probe = [f"{T0 + s + 0.2:.3f},{5.0 if s < 4 else 8.0}" for s in range(9)]
    (tmp_path / "cpu_probe.csv").write_text("\n".join(["epoch_s,probe_ms", *probe, "1796298169.0,"]) + "\n")
    return tmp_path


def test_each_sample_gets_the_clocks_and_cpu_of_its_own_window(step: Path) -> None:
    out = step / "conditions.csv"
    assert rep_conditions.main([str(step / "prefix-caching/h200_e2e_raw.json"), "--gpu-clocks",
                                str(step / "gpu_clocks.csv"), "--host-cpu", str(step / "host_cpu.csv"),
                                "--cpu-probe", str(step / "cpu_probe.csv"),
                                "--out", str(out), "--png", str(step / "c.png")]) == 0  # fmt: skip
    rows = rep_conditions.conditions(
        [step / "prefix-caching/h200_e2e_raw.json"],
        rep_conditions.read_gpu_clocks(step / "gpu_clocks.csv"),
        rep_conditions.read_host_cpu(step / "host_cpu.csv"),
        rep_conditions.read_cpu_probe(step / "cpu_probe.csv"),
    )
    fast, slow = rows
    assert (fast.run, fast.engine, fast.rep) == ("prefix-caching", "plan enable_prefix_caching=true", 0)
    assert fast.tpot_ms == pytest.approx(2.6) and slow.tpot_ms == pytest.approx(3.7)
    assert fast.sm_mhz_mean == 1980 and fast.throttle_reasons == "" and fast.cpu_steal_pct == 0
    assert slow.sm_mhz_min == 1410 and slow.throttle_reasons == "0x0000000000000004"
    assert slow.cpu_steal_pct == pytest.approx(40) and slow.cpu_busy_pct == pytest.approx(10)
    assert fast.cpu_probe_ms == pytest.approx(5.0) and slow.cpu_probe_ms == pytest.approx(8.0)
    assert (fast.engine_top_thread_pct, fast.server_itl_ms, fast.api_cpu_pct) == (None, None, None)
    assert slow.engine_top_thread_pct == pytest.approx(98) and slow.engine_cpu_pct == pytest.approx(120)
    assert slow.api_cpu_pct == pytest.approx(25) and slow.server_itl_ms == pytest.approx(3.7)
    assert out.read_text().count("\n") == 3 and (step / "c.png").stat().st_size > 10_000


def test_reads_a_real_step_without_a_host_cpu_file(tmp_path: Path) -> None:
    """2026-12-03b's Mixtral step, as filed: nvidia-smi's own CSV, three engines, 72 samples."""
    rows = rep_conditions.conditions(
        [RAW_MIXTRAL / "h200_e2e_raw.json"], rep_conditions.read_gpu_clocks(RAW_MIXTRAL / "gpu_clocks.csv"), []
    )
    assert len(rows) == 72 and {r.engine for r in rows} == {"plan", "triton", "auto"}
    assert all(r.gpu_lines >= 1 and r.sm_mhz_mean and r.sm_mhz_mean > 1800 for r in rows)
    assert all(r.cpu_busy_pct is None for r in rows)


def test_a_missing_input_is_refused_with_its_path(step: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = step / "nope.csv"
    code = rep_conditions.main([str(step / "prefix-caching/h200_e2e_raw.json"), "--gpu-clocks", str(missing),
                                "--out", str(step / "o.csv")])  # fmt: skip
    assert code == 2 and f"{missing}: no such file" in capsys.readouterr().err
