"""TPOT against the HBM floor, and one backend's decode rate over a baseline's, over concurrency (issue 31).

    python -m benchmarks.e2e.floor_plot h200_e2e.csv --baseline triton --png routing.png

Left: each backend's median TPOT (the bar spans best to median of its repetitions) above the floor its routing allows
(dashed). Right: median decode tok/s of every other backend ÷ the baseline's, from the same run, with a bar of ± the
larger of the two rows' spreads; a filled marker is a ratio beyond both spreads and above 1 % (what the reports bold),
a hollow one is not (a Nemotron run whose repetitions spread 20-50 % must not read as a 15 % loss). Only the short
input's rows (the 4096-token row is one point and stays in the table); rows under the floor are left out.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.e2e import report
from benchmarks.e2e.floor_rows import BELOW_FLOOR

MIN_EFFECT = 0.01  # a ratio within 1 % of 1 is never called a difference, whatever the spreads


def beyond_spreads(ratio: float, spread_pct: float, baseline_spread_pct: float) -> bool:
    """Whether a ratio of medians differs from 1 by more than both rows' spreads ((max − min) ÷ median) and 1 %."""
    return abs(ratio - 1.0) > max(spread_pct / 100, baseline_spread_pct / 100, MIN_EFFECT)


def _points(rows: Sequence[dict[str, Any]], backend: str, column: str) -> dict[int, float]:
    return {r["conc"]: r[column] for r in rows if r["backend"] == backend and r.get(column) is not None}


def plot(rows: Sequence[dict[str, Any]], baseline: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = [r for r in rows if r["status"] in ("ok", "truncated") and r.get("floor_check") != BELOW_FLOOR]
    if not measured:
        raise ValueError("no measured row above its floor to plot")
    short = min(r["input_len"] for r in measured)
    measured = [r for r in measured if r["input_len"] == short]
    backends = list(dict.fromkeys(r["backend"] for r in measured))
    if baseline not in backends:
        raise ValueError(f"--baseline {baseline!r}: not among the measured backends {backends}")
    routing = "/".join(sorted({str(r.get("routing") or "?") for r in measured}))
    fig, (ax_tpot, ax_ratio) = plt.subplots(1, 2, figsize=(11, 4))
    for backend in backends:
        median, best = _points(measured, backend, "tpot_ms_median"), _points(measured, backend, "tpot_ms_best")
        concs = sorted(median)
        ax_tpot.errorbar(concs, [median[c] for c in concs], fmt="o-", label=backend, capsize=3,
                         yerr=[[median[c] - best.get(c, median[c]) for c in concs], [0] * len(concs)])  # fmt: skip
    floor = _points(measured, backends[0], "floor_tpot_ms")
    if floor:
        concs = sorted(floor)
        ax_tpot.plot(concs, [floor[c] for c in concs], "k--", label=f"HBM floor ({routing})")
    ax_tpot.set_ylabel("TPOT ms (median; bar down to best)")
    runs = runs_in(measured)
    base, base_spread = _points(measured, baseline, "decode_tps_median"), _points(measured, baseline, "spread_pct")
    for backend in backends:
        if backend == baseline:
            continue
        mine, spread = _points(measured, backend, "decode_tps_median"), _points(measured, backend, "spread_pct")
        concs = sorted(set(mine) & set(base))
        ratios = [mine[c] / base[c] for c in concs]
        widest = [max(spread.get(c, 0.0), base_spread.get(c, 0.0)) / 100 for c in concs]
        line = ax_ratio.errorbar(concs, ratios, yerr=[r * w for r, w in zip(ratios, widest, strict=True)], fmt="-",
                                 capsize=3, label=f"{backend} ÷ {baseline}")  # fmt: skip
        colour = line[0].get_color()
        for c, r in zip(concs, ratios, strict=True):
            # a ratio across runs is never marked: run-to-run drift is not in either row's spread
            filled = runs == 1 and beyond_spreads(r, spread.get(c, 0.0), base_spread.get(c, 0.0))
            ax_ratio.plot([c], [r], "o", color=colour, markerfacecolor=colour if filled else "white")
    ax_ratio.axhline(1.0, color="grey", linewidth=1)
    ax_ratio.set_ylabel(
        "decode tok/s ÷ baseline (medians, " + ("one run)" if runs == 1 else f"{runs} runs, none marked)")
    )
    ax_ratio.set_title("filled: beyond both spreads; bar: ± the larger spread", fontsize=8)
    model = measured[0]["model"]
    for ax in (ax_tpot, ax_ratio):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrent requests")
        if ax.get_legend_handles_labels()[0]:  # a one-backend run has no ratio to draw
            ax.legend(fontsize=8)
    fig.suptitle(f"{model}, {short} in / {measured[0]['output_len']} out, routing {routing}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_run(rows: Sequence[dict[str, Any]], path: Path) -> bool:
    """A harness run's plot: the ratios to auto where the run measured auto, else (the tuned plan against Triton, a
    routing-cost step) TPOT against the HBM floor with Triton, or the first backend, as the baseline. False when
    neither can be drawn (no matplotlib, no row above its floor)."""
    if report.plot(rows, path):
        return True
    backends = [r["backend"] for r in rows if r.get("status") in ("ok", "truncated")]
    if not backends:
        return False
    try:
        plot(rows, "triton" if "triton" in backends else backends[0], path)
    except (ImportError, ValueError):
        return False
    return True


def runs_in(rows: Sequence[dict]) -> int:
    """How many harness runs the rows come from (a merged CSV holds several): each run probes the HBM once and every
    row of it carries that reading."""
    return len({r.get("hbm_read_tbps") for r in rows}) or 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.e2e.floor_plot", description=__doc__.splitlines()[0])
    parser.add_argument("csv", type=Path, help="a harness run's h200_e2e.csv")
    parser.add_argument("--baseline", default="triton", help="the backend the others are divided by")
    parser.add_argument("--png", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        plot(report.read_csv(args.csv), args.baseline, args.png)
    except ValueError as exc:
        parser.error(str(exc))
    print(f"floor_plot: wrote {args.png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
