"""Does a routing kernel's time follow the length of its code? The bench's µs against the sm_90 instruction count.

    python -m benchmarks.kernels.plot_uniform_route [--times h200_uniform_route.csv]
        [--code cpu_uniform_route_code.csv] [--png h200_uniform_route.png] [--md h200_uniform_route_code.md]

Joins `benchmarks.kernels.bench_uniform_route`'s timings (its GPU in the title) with
`benchmarks.kernels.uniform_route_code`'s counts (made without a GPU, for the same variants) on (experts, top-k,
variant). One panel per condition (warm, cold, cold_code), one point per variant at one token: SASS instructions
across, µs up, a marker per shape, vLLM's three kernels as a dashed line per shape (torch's kernels: not counted). If
fetching the code is what a launch costs, the cold_code points rise with the count and the warm ones less so. The
joined table (--md) gives the same numbers.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any

from benchmarks.paths import KERNEL_RESULTS

TIMES = KERNEL_RESULTS / "h200_uniform_route.csv"
CODE = KERNEL_RESULTS / "cpu_uniform_route_code.csv"
M = 1  # the count is of the launch at one token; so are the points
BASELINE = "vllm_three"


def _read(path: Path, required: set[str]) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    missing = required - (set(rows[0]) if rows else set())
    if not rows or missing:
        raise ValueError(f"{path}: {'no rows' if not rows else f'missing columns {sorted(missing)}'}")
    return rows


def join(times: list[dict[str, str]], code: list[dict[str, str]]) -> list[dict[str, Any]]:
    """One row per (condition, shape, variant) at M = 1: µs, spread, instructions (None for vLLM's torch ops)."""
    counts = {(r["experts"], r["top_k"], r["variant"]): int(r["instructions"]) for r in code}
    joined = []
    for row in times:
        if int(row["M"]) != M:
            continue
        variants = [c.removesuffix("_us") for c in row if c.endswith("_us")]
        for variant in variants:
            instructions = counts.get((row["experts"], row["top_k"], variant))
            if instructions is None and variant != BASELINE:
                raise ValueError(f"no instruction count for {variant} at {row['experts']}/{row['top_k']}; "
                                 "run `python -m benchmarks.kernels.uniform_route_code` for these shapes")  # fmt: skip
            joined.append({"condition": row["condition"], "experts": int(row["experts"]), "top_k": int(row["top_k"]),
                           "variant": variant, "us": float(row[f"{variant}_us"]),
                           "spread": float(row[f"{variant}_spread"]), "instructions": instructions})  # fmt: skip
    if not joined:
        raise ValueError(f"no rows at M = {M} in the timings")
    return joined


def markdown(rows: list[dict[str, Any]]) -> str:
    head = ["| condition | experts / top-k | variant | SASS instructions | µs at M = 1 (spread) |",
            "|---|---|---|---|---|"]  # fmt: skip
    body = [f"| {r['condition']} | {r['experts']} / {r['top_k']} | {r['variant']} | "
            f"{'–' if r['instructions'] is None else format(r['instructions'], ',')} | "
            f"{r['us']:.2f} ({100 * r['spread']:.1f} %) |" for r in rows]  # fmt: skip
    return "\n".join([*head, *body]) + "\n"


def gpu_of(times: list[dict[str, str]]) -> str:
    """The GPU the timings name (the bench's ``gpu`` column), for the plot's title."""
    return ", ".join(dict.fromkeys(r.get("gpu") or "an unnamed GPU" for r in times))


def plot(rows: list[dict[str, Any]], png: Path, gpu: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    conditions = list(dict.fromkeys(r["condition"] for r in rows))
    shapes = list(dict.fromkeys((r["experts"], r["top_k"]) for r in rows))
    markers, colours = "osD^v", plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, axes = plt.subplots(1, len(conditions), figsize=(5 * len(conditions), 4.2), sharey=True, squeeze=False)
    for ax, condition in zip(axes[0], conditions, strict=True):
        for i, shape in enumerate(shapes):
            here = [r for r in rows if r["condition"] == condition and (r["experts"], r["top_k"]) == shape]
            points = [r for r in here if r["instructions"] is not None]
            label = f"{shape[0]} experts, top-{shape[1]}"
            ax.scatter([r["instructions"] for r in points], [r["us"] for r in points], marker=markers[i % 5],
                       color=colours[i % len(colours)], label=label)  # fmt: skip
            for r in points:
                ax.annotate(r["variant"], (r["instructions"], r["us"]), fontsize=6, xytext=(3, 2),
                            textcoords="offset points")  # fmt: skip
            for r in here:
                if r["variant"] == BASELINE:
                    ax.axhline(r["us"], color=colours[i % len(colours)], linestyle="--", linewidth=0.8,
                               label=f"vLLM's three kernels, {label}")  # fmt: skip
        ax.set_xscale("log")
        ax.set_xlabel("sm_90 SASS instructions (Triton 3.7.1)")
        ax.set_title(condition)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"µs per routing launch at M = {M}")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"One-launch uniform routing on the {gpu}: time against code length")
    fig.tight_layout()
    fig.savefig(png, dpi=130)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.kernels.plot_uniform_route",
                                 description=__doc__.splitlines()[0])  # fmt: skip
    ap.add_argument("--times", type=Path, default=TIMES)
    ap.add_argument("--code", type=Path, default=CODE)
    ap.add_argument("--png", type=Path, default=KERNEL_RESULTS / "h200_uniform_route.png")
    ap.add_argument("--md", type=Path, default=KERNEL_RESULTS / "h200_uniform_route_code.md")
    args = ap.parse_args(argv)
    try:
        times = _read(args.times, {"condition", "experts", "top_k", "M"})
        rows = join(times, _read(args.code, {"experts", "top_k", "variant", "instructions"}))
    except (OSError, ValueError) as exc:
        print(f"plot_uniform_route: {exc}", file=sys.stderr)
        return 2
    args.md.write_text(markdown(rows))
    plot(rows, args.png, gpu_of(times))
    print(f"wrote {args.md} and {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
