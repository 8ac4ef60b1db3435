"""The baked-start goal read against the machine: each start of a breakdown beside the CPU speed sampled during it.

Issue 14's goal is a start from the compile-cache layer within 1.2x a warm start. On 2026-12-03c one layer start took
1.28-1.51x two warm starts while every CPU-bound phase of it ran slower and steal stayed at 0; two identical warm
starts a minute apart differed by 18 %. So the ratio is taken over several alternating starts (`--start-pairs`), and
each start is joined with the probe `run_queue.sh` runs beside the step (cpu_probe.csv: the milliseconds a fixed
pure-Python loop took, once a second) by its launch time (the `launched_at_epoch_s` column of start_breakdown.csv).
A start whose probe ran slower than the step's usual ran on a slower core, whatever it loaded.

    python -m benchmarks.e2e.start_conditions start_breakdown.csv --cpu-probe cpu_probe.csv[.gz] \\
        [--host-cpu host_cpu.csv[.gz]] --out start_conditions.csv [--png start_conditions.png]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.e2e.rep_conditions import CpuInterval, read_cpu_probe, read_host_cpu, write_csv
from benchmarks.e2e.start_rows import read_start_rows

GOAL = 1.2  # issue 14: a start from the layer within 1.2x a warm start
# "warm", "warm 2", ... and "layer", "layer 2", ...: the starts the goal compares ("warm-spawn" is a comparison row)
WARM, LAYER = "warm", "layer"


@dataclass(frozen=True)
class StartCondition:
    order: int  # the start's place in the breakdown
    mode: str
    status: str
    start_s: float | None
    launched_at_epoch_s: float | None
    probe_ms_median: float | None  # the CPU probe during the start
    probe_vs_step: float | None  # that over the probe's median over the whole step: > 1 is a slower core
    busy_cores_mean: float | None
    steal_pct_mean: float | None


@dataclass(frozen=True)
class GoalReading:
    warm: tuple[float, ...]
    layer: tuple[float, ...]

    @property
    def ratio(self) -> float | None:
        """median layer start over median warm start."""
        if not self.warm or not self.layer:
            return None
        return statistics.median(self.layer) / statistics.median(self.warm)

    @property
    def span(self) -> tuple[float, float] | None:
        """the ratio's range: the fastest layer start over the slowest warm one, and the other way round."""
        if not self.warm or not self.layer:
            return None
        return min(self.layer) / max(self.warm), max(self.layer) / min(self.warm)

    def line(self) -> str:
        if self.ratio is None or self.span is None:
            return f"goal: not readable ({len(self.warm)} warm and {len(self.layer)} layer starts measured)"
        verdict = "met" if self.ratio <= GOAL else "not met"
        return (
            f"goal: layer / warm = {self.ratio:.2f} (median of {len(self.layer)} layer over {len(self.warm)} warm "
            f"starts; range {self.span[0]:.2f}-{self.span[1]:.2f}): {verdict} (goal <= {GOAL})"
        )


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


def is_mode(mode: str, kind: str) -> bool:
    """`warm`, `warm 2`, ... are warm starts; `warm-spawn` is not (another start method)."""
    return mode == kind or (mode.startswith(kind + " ") and mode[len(kind) + 1 :].isdigit())


def goal_reading(rows: Sequence[dict[str, str]]) -> GoalReading:
    def times(kind: str) -> tuple[float, ...]:
        found = (_float(r.get("start_s")) for r in rows if r.get("status") == "ok" and is_mode(r["mode"], kind))
        return tuple(t for t in found if t is not None)

    return GoalReading(times(WARM), times(LAYER))


def _in(cpu: Sequence[CpuInterval], start: float, end: float) -> list[CpuInterval]:
    return [c for c in cpu if start <= (c.start_epoch_s + c.end_epoch_s) / 2 <= end]


def start_conditions(
    rows: Sequence[dict[str, str]],
    probe: Sequence[tuple[float, float]],
    cpu: Sequence[CpuInterval],
    cores: int,
) -> list[StartCondition]:
    step_probe = statistics.median(ms for _, ms in probe) if probe else None
    out = []
    for order, row in enumerate(rows, 1):
        start_s, launched = _float(row.get("start_s")), _float(row.get("launched_at_epoch_s"))
        probe_ms = busy = steal = None
        if start_s is not None and launched is not None:
            end = launched + start_s
            during = [ms for at, ms in probe if launched <= at <= end]
            probe_ms = statistics.median(during) if during else None
            intervals = _in(cpu, launched, end)
            if intervals:
                busy = statistics.fmean(c.busy_pct for c in intervals) * cores / 100
                steal = statistics.fmean(c.steal_pct for c in intervals)
        out.append(StartCondition(
            order=order, mode=row["mode"], status=row.get("status", ""), start_s=start_s,
            launched_at_epoch_s=launched, probe_ms_median=probe_ms,
            probe_vs_step=probe_ms / step_probe if probe_ms is not None and step_probe else None,
            busy_cores_mean=busy, steal_pct_mean=steal,
        ))  # fmt: skip
    return out


def plot(rows: Sequence[StartCondition], reading: GoalReading, path: Path) -> bool:
    """Each start's time (bars, by mode) above the CPU probe during it relative to the step's median."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    shown = [r for r in rows if r.start_s is not None]
    if not shown:
        return False
    colour = {WARM: "tab:blue", LAYER: "tab:green"}
    fig, (ax_start, ax_probe) = plt.subplots(2, 1, figsize=(9, 6), sharex=True, height_ratios=(2, 1))
    x = range(len(shown))
    kinds = [next((k for k in (WARM, LAYER) if is_mode(r.mode, k)), "other") for r in shown]
    ax_start.bar(x, [r.start_s or 0 for r in shown], color=[colour.get(k, "tab:gray") for k in kinds])
    for i, r in zip(x, shown, strict=True):
        ax_start.text(i, (r.start_s or 0) + 1, f"{r.start_s:.0f}", ha="center", fontsize=8)
    ax_start.set_ylabel("to /health 200, s")
    ax_start.set_title(reading.line().replace("goal: ", ""), fontsize=9)
    ax_probe.bar(x, [r.probe_vs_step or 0 for r in shown], color="black")
    ax_probe.axhline(1.0, lw=0.8, color="gray")
    ax_probe.set_ylabel("CPU probe\n÷ step median")
    ax_probe.set_xticks(list(x), [r.mode for r in shown], rotation=30, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.e2e.start_conditions", description=__doc__.split("\n")[0])
    p.add_argument("breakdown", type=Path, help="a start breakdown's start_breakdown.csv")
    p.add_argument("--cpu-probe", type=Path, help="the step's cpu_probe.csv[.gz]")
    p.add_argument("--host-cpu", type=Path, help="the step's host_cpu.csv[.gz]")
    p.add_argument("--cores", type=int, default=16, help="the host's cores, to read busy shares as cores (16)")
    p.add_argument("--out", type=Path, required=True, help="CSV, one line per start")
    p.add_argument("--png", type=Path, help="the starts above the CPU probe during each")
    args = p.parse_args(argv)
    for path in (args.breakdown, args.cpu_probe, args.host_cpu):
        if path is not None and not path.is_file():
            print(f"start_conditions: {path}: no such file", file=sys.stderr)
            return 2
    if args.cores < 1:
        print(f"start_conditions: --cores {args.cores}: accepted: a whole number >= 1", file=sys.stderr)
        return 2
    rows = read_start_rows(args.breakdown)
    probe = read_cpu_probe(args.cpu_probe) if args.cpu_probe else []
    cpu = read_host_cpu(args.host_cpu) if args.host_cpu else []
    joined = start_conditions(rows, probe, cpu, args.cores)
    reading = goal_reading(rows)
    write_csv(joined, args.out, StartCondition)
    if args.png:
        plot(joined, reading, args.png)
    for r in joined:
        ratio = "–" if r.probe_vs_step is None else f"{r.probe_vs_step:.2f}"
        print(f"  {r.order:2d} {r.mode:12s} {r.status:9s} {r.start_s or float('nan'):7.1f} s  probe ÷ step {ratio}")
    print(reading.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
