"""Where a decode step's time goes, one bar per profiled trace (issue 33): the GPU time of each kernel class, then the
gaps between kernels, stacked to the step's span.

    python -m benchmarks.e2e.profile_plot profile_steps.csv --png profile_steps.png
    python -m benchmarks.e2e.profile_plot profile_timeline.csv --layer --png profile_layer.png

With --layer it reads the timeline CSV instead (`profile_trace --out-timeline-csv`: one step, kernel by kernel) and
draws one layer of it on a time axis: the kernels from one start of the step's MoE GEMM (the first kernel of class
moe_gemm_*) to the next, a middle layer's, each a bar from its start for its duration, so the gaps and overlaps
between kernels show.

Reads the per-class CSV `benchmarks.e2e.profile_trace` writes (medians per step). A class's segment is its median
exclusive µs per step (overlapping kernels' time given to the one that started first); the gap segment is the
median span minus the median GPU busy time, so the bar's length is the median step as the profiler saw it (its
kernels run a little slower than unprofiled: compare bars, not a bar with a TPOT).
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks.e2e.profile_trace import CLASSES

# one colour per class, stacked in the classifier's order
# the MoE block's classes first, then the rest in the classifier's order (a class may have several patterns)
MOE_FIRST = ("moe_gemm_ours", "moe_gemm_vllm", "moe_sum", "router_gemm", "moe_routing", "routing_simulator")
CLASS_ORDER = tuple(dict.fromkeys([*MOE_FIRST, *(name for name, _ in CLASSES), "other"]))
GAP = "gaps between kernels"


def _rows(path: Path, required: set[str], what: str, *, empty_ok: bool) -> list[dict[str, str]]:
    """The CSV's rows, refused naming the columns it lacks of ``required``."""
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows and not empty_ok:
        raise ValueError(f"{path}: no rows")
    missing = required - (rows[0].keys() if rows else set())
    if missing:
        raise ValueError(f"{path}: not a profile_trace {what} (missing columns {sorted(missing)})")
    return rows


def read_traces(path: Path) -> dict[str, dict[str, float]]:
    """{trace: {class: µs per step, ..., GAP: µs, "_kernels": kernels per step}} in the CSV's order."""
    required = {"trace", "kernel_class", "us_per_step", "step_gap_us", "step_kernels_per_step"}
    rows = _rows(path, required, "CSV", empty_ok=False)
    traces: dict[str, dict[str, float]] = {}
    for r in rows:
        t = traces.setdefault(r["trace"], {GAP: float(r["step_gap_us"]), "_kernels": float(r["step_kernels_per_step"])})
        # exclusive µs where the CSV has them (profile_trace since 2026-12-05): the bar then adds up to the span
        t[r["kernel_class"]] = float(r.get("exclusive_us_per_step") or r["us_per_step"])
    return traces


def plot(traces: dict[str, dict[str, float]], png: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    present = {c for t in traces.values() for c in t if not c.startswith("_") and c != GAP}
    classes = [c for c in CLASS_ORDER if c in present] + sorted(present - set(CLASS_ORDER)) + [GAP]
    labels = list(traces)
    fig, ax = plt.subplots(figsize=(11, 2.6 + 0.5 * len(labels)))
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


def layer_of(path: Path) -> list[dict[str, str]]:
    """The timeline's kernels from the middle occurrence of its first MoE GEMM kernel's name to the next one."""
    rows = _rows(path, {"name", "kernel_class", "start_us", "duration_us"}, "timeline CSV", empty_ok=True)
    anchor = next((r["name"] for r in rows if r["kernel_class"].startswith("moe_gemm")), None)
    if anchor is None:
        raise ValueError(f"{path}: no MoE GEMM kernel in the step: no layer to cut")
    starts = [i for i, r in enumerate(rows) if r["name"] == anchor]
    if len(starts) < 2:
        raise ValueError(f"{path}: {anchor} runs once in the step: no layer to cut")
    middle = (len(starts) - 1) // 2  # of the len(starts) - 1 whole layers
    return rows[starts[middle] : starts[middle + 1] + 1]


def plot_layer(rows: Sequence[dict[str, str]], png: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = float(rows[0]["start_us"])
    colours = plt.get_cmap("tab20")
    fig, ax = plt.subplots(figsize=(11, 0.9 + 0.28 * len(rows)))
    seen: set[str] = set()
    for y, r in enumerate(rows):
        cls = r["kernel_class"]
        index = CLASS_ORDER.index(cls) if cls in CLASS_ORDER else len(CLASS_ORDER)
        ax.barh(y, float(r["duration_us"]), left=float(r["start_us"]) - t0, color=colours(index),
                label=None if cls in seen else cls)  # fmt: skip
        seen.add(cls)
        ax.text(float(r["start_us"]) - t0 + float(r["duration_us"]) + 0.3, y,
                f"{r['name'][:48]} {float(r['duration_us']):.1f} µs", va="center", fontsize=6)  # fmt: skip
    ax.set_yticks([])
    ax.invert_yaxis()
    period = float(rows[-1]["start_us"]) - t0
    ax.set_xlabel(f"µs from the layer's MoE GEMM start (one layer: {period:.1f} µs, under the profiler)")
    ax.set_xlim(0, period * 1.35)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(png, dpi=120, bbox_inches="tight")
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.e2e.profile_plot", description=__doc__.splitlines()[0])
    parser.add_argument("csv", type=Path, help="profile_steps.csv (or, with --layer, profile_timeline.csv)")
    parser.add_argument("--png", type=Path, required=True)
    parser.add_argument("--layer", action="store_true", help="one layer of a timeline CSV on a time axis")
    parser.add_argument("--title", default="", help="default: the CSV's folder name")
    args = parser.parse_args(argv)
    try:
        if args.layer:
            plot_layer(layer_of(args.csv), args.png, args.title or f"one layer's kernels: {args.csv.parent.name}")
        else:
            plot(read_traces(args.csv), args.png, args.title or f"decode step by kernel class: {args.csv.parent.name}")
    except (OSError, ValueError, KeyError) as exc:
        print(f"profile_plot: {exc}", file=sys.stderr)
        return 2
    print(f"profile_plot: wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
