"""What the machine was doing during each measured repetition: the GPU's clocks and the host's CPU beside its TPOT.

Nemotron's repetitions of one engine spread 3-39 % (2026-12-02) while Qwen3's and Mixtral's held 0.1-1 %; a slow
repetition stayed slow for all its workloads. This joins each sample of a run's raw JSON (its end time and wall
time) with the lines `run_queue.sh` sampled once a second beside the step (gpu_clocks.csv from nvidia-smi,
host_cpu.csv from /proc), so a slow repetition can be read against the SM clock, throttle reasons, CPU steal and load;
and, for samples that carry it (benchmarks/e2e/host_meter.py), against the engine's busiest thread's share of a core
and the engine's own inter-token latency.

    python -m benchmarks.e2e.rep_conditions RAW.json[.gz] [RAW2 ...] --gpu-clocks gpu_clocks.csv[.gz] \\
        [--host-cpu host_cpu.csv[.gz]] [--cpu-probe cpu_probe.csv[.gz]] --out conditions.csv [--png conditions.png]
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import gzip
import itertools
import json
import statistics
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import IO, Any

from benchmarks.e2e.stats import RequestTiming, summarize_batch

CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class GpuLine:
    epoch_s: float
    sm_mhz: float
    power_w: float | None
    reasons: str  # clocks_event_reasons.active as nvidia-smi prints it; "" when the driver did not answer it


@dataclass(frozen=True)
class CpuInterval:
    """The host's CPU between two consecutive /proc samples."""

    start_epoch_s: float
    end_epoch_s: float
    busy_pct: float  # of all cores: user + nice + system + irq + softirq
    steal_pct: float
    load1: float
    mean_mhz: float | None


@dataclass(frozen=True)
class Condition:
    run: str
    engine: str
    rep: int
    input_len: int
    conc: int
    start_epoch_s: float
    wall_s: float
    tpot_ms: float
    gpu_lines: int
    sm_mhz_mean: float | None
    sm_mhz_min: float | None
    power_w_mean: float | None
    throttle_reasons: str  # the distinct non-zero reasons seen, ";"-joined
    cpu_busy_pct: float | None
    cpu_steal_pct: float | None
    load1_max: float | None
    cpu_mhz_mean: float | None
    cpu_probe_ms: float | None  # run_queue.sh's fixed pure-Python loop (cpu_probe.csv), mean in the window
    # the sample's own host meter (benchmarks/e2e/host_meter.py; samples from 2026-12-05 on): % of one core over the
    # batch's wall time, and the engine's mean inter-token latency over the batch
    api_cpu_pct: float | None = None
    engine_cpu_pct: float | None = None
    engine_top_thread_pct: float | None = None
    server_itl_ms: float | None = None


def _open_text(path: Path) -> IO[str]:
    return gzip.open(path, "rt") if path.suffix == ".gz" else path.open()


def _number(text: str) -> float | None:
    head = text.strip().split(" ")[0]
    try:
        return float(head)
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"


def read_gpu_clocks(path: Path) -> list[GpuLine]:
    """nvidia-smi's CSV; its timestamp is the device's UTC wall clock ("2026/12/03 11:40:04.194")."""
    lines: list[GpuLine] = []
    with _open_text(path) as f:
        rows = csv.reader(f, skipinitialspace=True)
        header = next(rows, None)
        if not header or not header[0].startswith("timestamp"):
            return lines  # the sampler wrote "no nvidia-smi query answered"
        names = [h.split(" [")[0] for h in header]
        for row in rows:
            if len(row) != len(names):
                continue
            cell = dict(zip(names, row, strict=True))
            stamp = dt.datetime.strptime(cell["timestamp"], "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=dt.UTC)
            sm = _number(cell.get("clocks.current.sm", ""))
            if sm is None:
                continue
            reasons = cell.get("clocks_event_reasons.active", cell.get("clocks_throttle_reasons.active", ""))
            lines.append(GpuLine(stamp.timestamp(), sm, _number(cell.get("power.draw", "")), reasons))
    return lines


def read_host_cpu(path: Path) -> list[CpuInterval]:
    """host_cpu.csv's cumulative jiffies, turned into the share of each interval between two lines."""
    with _open_text(path) as f:
        rows = list(csv.DictReader(f))
    intervals = []
    for before, after in itertools.pairwise(rows):
        delta = {k: int(after[k]) - int(before[k]) for k in CPU_FIELDS}
        total = sum(delta.values())
        if total <= 0:
            continue
        busy = delta["user"] + delta["nice"] + delta["system"] + delta["irq"] + delta["softirq"]
        mhz = after.get("mean_mhz") or ""
        span = (float(before["epoch_s"]), float(after["epoch_s"]))
        intervals.append(CpuInterval(*span, 100 * busy / total, 100 * delta["steal"] / total, float(after["load1"]),
                                     float(mhz) if mhz else None))  # fmt: skip
    return intervals


def _nonzero_reasons(text: str) -> bool:
    try:
        return int(text, 16) != 0
    except ValueError:
        return False  # not answered by this driver


def read_cpu_probe(path: Path) -> list[tuple[float, float]]:
    """cpu_probe.csv: (epoch_s, probe_ms), one a second; a line the probe did not finish is skipped."""
    with _open_text(path) as f:
        out = []
        for row in csv.DictReader(f):
            try:
                out.append((float(row["epoch_s"]), float(row["probe_ms"])))
            except (TypeError, ValueError):
                continue
        return out


def _samples(raw_path: Path) -> Iterable[tuple[str, dict[str, Any]]]:
    with _open_text(raw_path) as f:
        results = json.load(f)
    for result in results:
        engine = result["backend"] + (f" {result['options']}" if result.get("options") else "")
        for sample in result.get("samples", []):
            if sample.get("event") == "sample":
                yield engine, sample


def _intervals_in(cpu: Sequence[CpuInterval], start: float, end: float) -> list[CpuInterval]:
    """The 1 s intervals whose middle falls inside [start, end]; for a sample shorter than that, the one holding its
    middle."""
    inside = [c for c in cpu if start <= (c.start_epoch_s + c.end_epoch_s) / 2 <= end]
    middle = (start + end) / 2
    return inside or [c for c in cpu if c.start_epoch_s <= middle <= c.end_epoch_s][:1]


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def host_columns(sample: dict[str, Any], wall_s: float) -> dict[str, float | None]:
    """The host meter's fields of one sample as Condition columns (None where the sample has none)."""

    def pct(key: str) -> float | None:
        value = sample.get(key)
        return None if value is None or wall_s <= 0 else 100.0 * float(value) / wall_s

    count = sample.get("server_itl_count")
    itl = 1000.0 * float(sample["server_itl_sum_s"]) / count if count else None
    return {"api_cpu_pct": pct("api_cpu_s"), "engine_cpu_pct": pct("engine_cpu_s"),
            "engine_top_thread_pct": pct("engine_top_thread_cpu_s"), "server_itl_ms": itl}  # fmt: skip


def conditions(
    raw_paths: Sequence[Path],
    gpu: Sequence[GpuLine],
    cpu: Sequence[CpuInterval],
    probe: Sequence[tuple[float, float]] = (),
) -> list[Condition]:
    out = []
    for raw_path in raw_paths:
        run = raw_path.parent.name
        for engine, s in _samples(raw_path):
            end, wall = float(s["t"]), float(s["wall_s"])
            start = end - wall
            timings = [RequestTiming(**r) for r in s["requests"]]
            in_window = [g for g in gpu if start - 0.5 <= g.epoch_s <= end + 0.5]
            overlapping = _intervals_in(cpu, start, end)
            reasons = sorted({g.reasons for g in in_window if _nonzero_reasons(g.reasons)})
            mhz = [c.mean_mhz for c in overlapping if c.mean_mhz is not None]
            out.append(Condition(
                run=run, engine=engine, rep=int(s["rep"]), input_len=int(s["input_len"]), conc=int(s["conc"]),
                start_epoch_s=start, wall_s=wall, tpot_ms=summarize_batch(timings, wall).tpot_ms,
                gpu_lines=len(in_window),
                sm_mhz_mean=_mean([g.sm_mhz for g in in_window]),
                sm_mhz_min=min((g.sm_mhz for g in in_window), default=None),
                power_w_mean=_mean([g.power_w for g in in_window if g.power_w is not None]),
                throttle_reasons=";".join(reasons),
                cpu_busy_pct=_mean([c.busy_pct for c in overlapping]),
                cpu_steal_pct=_mean([c.steal_pct for c in overlapping]),
                load1_max=max((c.load1 for c in overlapping), default=None),
                cpu_mhz_mean=_mean(mhz),
                cpu_probe_ms=_mean([ms for at, ms in probe if start - 0.5 <= at <= end + 0.5]),
                **host_columns(s, wall),
            ))  # fmt: skip
    return out


def write_csv(rows: Sequence[Any], path: Path, row_type: type = Condition) -> None:
    """One line per row (a dataclass of `row_type`: this module's Condition, or start_conditions' StartCondition);
    floats to three decimals."""
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[fl.name for fl in fields(row_type)])
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.3f}" if isinstance(v, float) else v) for k, v in asdict(row).items()})


def plot(
    rows: Sequence[Condition],
    gpu: Sequence[GpuLine],
    cpu: Sequence[CpuInterval],
    path: Path,
    probe: Sequence[tuple[float, float]] = (),
) -> bool:
    """TPOT of every sample against time, above the SM clock and the host's CPU busy / steal share."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    if not rows:
        return False
    t0 = min(r.start_epoch_s for r in rows)
    fig, (ax_tpot, ax_gpu, ax_cpu) = plt.subplots(3, 1, figsize=(11, 8), sharex=True)
    for key in sorted({(r.run, r.engine, r.conc, r.input_len) for r in rows}):
        pts = [r for r in rows if (r.run, r.engine, r.conc, r.input_len) == key]
        line = ax_tpot.plot([r.start_epoch_s - t0 for r in pts], [r.tpot_ms for r in pts], "o-", ms=3,
                            label=f"{key[0]} {key[1].split()[0]} c{key[2]} in{key[3]}")  # fmt: skip
        itl = [(r.start_epoch_s - t0, r.server_itl_ms) for r in pts if r.server_itl_ms is not None]
        if itl:  # the engine's own inter-token latency (host_meter): apart from TPOT, the client or API server lags
            ax_tpot.plot(*zip(*itl, strict=True), "x", ms=4, color=line[0].get_color())
    ax_tpot.set_ylabel("TPOT ms (o client, x engine)")
    # the run names the variant (its options, in the CSV, made the legend wider than the plot)
    ax_tpot.legend(fontsize=6, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax_gpu.plot([g.epoch_s - t0 for g in gpu], [g.sm_mhz for g in gpu], lw=0.8)
    ax_gpu.set_ylabel("SM MHz")
    ax_cpu.plot([c.end_epoch_s - t0 for c in cpu], [c.busy_pct for c in cpu], lw=0.8, label="busy %")
    ax_cpu.plot([c.end_epoch_s - t0 for c in cpu], [c.steal_pct for c in cpu], lw=0.8, label="steal %")
    if not cpu:
        ax_cpu.text(0.5, 0.5, "no host_cpu.csv for this step", transform=ax_cpu.transAxes, ha="center")
    thread = [(r.start_epoch_s + r.wall_s / 2 - t0, r.engine_top_thread_pct) for r in rows
              if r.engine_top_thread_pct is not None]  # fmt: skip
    if thread:  # near 100 %: the engine's busiest thread is saturated, the host sets the step
        ax_cpu.plot(*zip(*thread, strict=True), "v", ms=4, color="red", label="busiest engine thread % of a core")
    ax_cpu.set_ylabel("host CPU %")
    if probe:
        ax_probe = ax_cpu.twinx()
        ax_probe.plot([at - t0 for at, _ in probe], [ms for _, ms in probe], lw=0.8, color="black", label="probe ms")
        ax_probe.set_ylabel("CPU probe ms (higher = slower core)")
    ax_cpu.set_xlabel("s since the first measured sample")
    ax_cpu.legend(fontsize=7)
    ax_cpu.set_xlim(-10.0, max(r.start_epoch_s + r.wall_s for r in rows) - t0 + 10)  # the measured span, not the start
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")  # the legend sits right of the plot
    plt.close(fig)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.e2e.rep_conditions", description=__doc__.split("\n")[0])
    p.add_argument("raw", nargs="+", type=Path, help="h200_e2e_raw.json[.gz] of one or more runs of the step")
    p.add_argument("--gpu-clocks", type=Path, required=True, help="the step's gpu_clocks.csv[.gz]")
    p.add_argument("--host-cpu", type=Path, help="the step's host_cpu.csv[.gz] (sessions since 2026-12-03c)")
    p.add_argument("--cpu-probe", type=Path, help="the step's cpu_probe.csv[.gz] (a core's speed over time)")
    p.add_argument("--out", type=Path, required=True, help="CSV, one line per sample")
    p.add_argument("--png", type=Path, help="TPOT over time above the SM clock and the host's CPU")
    args = p.parse_args(argv)
    for path in [*args.raw, args.gpu_clocks, *(f for f in (args.host_cpu, args.cpu_probe) if f)]:
        if not path.is_file():
            print(f"rep_conditions: {path}: no such file", file=sys.stderr)
            return 2
    gpu = read_gpu_clocks(args.gpu_clocks)
    cpu = read_host_cpu(args.host_cpu) if args.host_cpu else []
    probe = read_cpu_probe(args.cpu_probe) if args.cpu_probe else []
    rows = conditions(args.raw, gpu, cpu, probe)
    write_csv(rows, args.out)
    if args.png:
        plot(rows, gpu, cpu, args.png, probe)
    print(f"rep_conditions: {len(rows)} samples, {len(gpu)} GPU lines, {len(cpu)} CPU intervals -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
