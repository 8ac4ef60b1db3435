"""Where a decode step's time goes, one bar per profiled trace (issue 33): the GPU time of each kernel class, then the
gaps between kernels, stacked to the step's span.

    python -m benchmarks.e2e.profile_plot profile_steps.csv --png profile_steps.png

Reads the per-class CSV `benchmarks.e2e.profile_trace` writes (medians per step). A class's segment is its median µs
per step; the gap segment is the median span minus the median GPU busy time, so the bar's length is the median step
as the profiler saw it (its kernels run a little slower than unprofiled: compare bars, not a bar with a TPOT).
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks.e2e.profile_trace import CLASSES

# one colour per class, stacked in the classifier's order
CLASS_ORDER = (*(name for name, _ in CLASSES), "other")
GAP = "gaps between kernels"


def read_traces(path: Path) -> dict[str, dict[str, float]]:
    """{trace: {class: µs per step, ..., GAP: µs, "_kernels": kernels per step}} in the CSV's order."""
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{path}: no rows")
    missing = {"trace", "kernel_class", "us_per_step", "step_gap_us", "step_kernels_per_step"} - rows[0].keys()
    if missing:
        raise ValueError(f"{path}: not a profile_trace CSV (missing columns {sorted(missing)})")
    traces: dict[str, dict[str, float]] = {}
    for r in rows:
        t = traces.setdefault(r["trace"], {GAP: float(r["step_gap_us"]), "_kernels": float(r["step_kernels_per_step"])})
        t[r["kernel_class"]] = float(r["us_per_step"])
    return traces


def plot(traces: dict[str, dict[str, float]], png: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    present = {c for t in traces.values() for c in t if not c.startswith("_") and c != GAP}
    classes = [c for c in CLASS_ORDER if c in present] + sorted(present - set(CLASS_ORDER)) + [GAP]
    labels = list(traces)
    fig, ax = plt.subplots(figsize=(11, 1.8 + 0.5 * len(labels)))
    colours = plt.get_cmap("tab20")
    left = [0.0] * len(labels)
    for i, cls in enumerate(classes):
        widths = [traces[label].get(cls, 0.0) for label in labels]
        style = {"color": "white", "edgecolor": "grey", "hatch": "//"} if cls == GAP else {"color": colours(i)}
        ax.barh(labels, widths, left=left, label=cls, **style)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    for y, label in enumerate(labels):
        ax.text(left[y], y, f"  {traces[label]['_kernels']:.0f} kernels", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("µs per decode step (medians; under the profiler)")
    ax.set_xlim(0, max(left) * 1.2)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(png, dpi=120, bbox_inches="tight")
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.e2e.profile_plot", description=__doc__.splitlines()[0])
    parser.add_argument("csv", type=Path, help="profile_steps.csv from benchmarks.e2e.profile_trace")
    parser.add_argument("--png", type=Path, required=True)
    parser.add_argument("--title", default="", help="default: the CSV's folder name")
    args = parser.parse_args(argv)
    try:
        traces = read_traces(args.csv)
    except (OSError, ValueError, KeyError) as exc:
        print(f"profile_plot: {exc}", file=sys.stderr)
        return 2
    plot(traces, args.png, args.title or f"decode step by kernel class: {args.csv.parent.name}")
    print(f"profile_plot: wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
