"""Would moving the PAIR/SCAN switch of our kernel per shape widen the dispatch table? (issue 15, item 4)

    python -m benchmarks.kernels.pair_scan_crossover   # from benchmarks/results/kernels/h200_fused_moe_2026-12-01d.csv
                                                       # → benchmarks/results/kernels/h200_pair_scan.md

An analysis of the 2026-12-01d run (vLLM 0.26), whose table rule was uniform and all-shared routing. The current
table takes the worse of uniform and a few hot experts (issue 31), and the kernel bench does not time the forced
modes under hot routing, so this question has not been asked again; its default CSV stays the dated one.

`ops.fused_moe_fp8.default_config` picks PAIR mode (one program per (token, expert) pair) at small M and SCAN mode
(one program per expert, scanning its tokens) above a crossover that is the same rule for every shape. The kernel
bench times both modes forced (``ours_pair_us`` / ``ours_scan_us``) at 1 < M <= 16, each with uniform routing and with
every token on the same experts (``*_shared_us``), next to vLLM's kernel under both routings. Whether a mode may run
at an M is the dispatch table's own rule (`benchmarks.kernels.dispatch_table`): at least ``--min-speedup`` faster
than vLLM under both routings. A mode is picked per (shape, M) before the routing is known (CUDA graphs are
captured per M), so it must pass under both with one choice. This prints, per (shape, M), which mode is faster
under each routing, whether the shipped crossover picks the faster one, and whether either mode would pass the rule
where the shipped table keeps vLLM's kernel: the M values a per-shape crossover would add.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.kernels.dispatch_table import DEFAULT_MIN_SPEEDUP, _number
from benchmarks.paths import KERNEL_RESULTS
from kernels.dispatch import DISPATCH_FILE

DEFAULT_CSV = KERNEL_RESULTS / "h200_fused_moe_2026-12-01d.csv"
DEFAULT_OUT = KERNEL_RESULTS / "h200_pair_scan.md"
MODES = ("pair", "scan")


@dataclass(frozen=True)
class ModePoint:
    shape: str
    m: int
    shipped_mode: str
    ours_us: dict[str, tuple[float, float]]  # mode → (uniform µs, shared µs)
    vllm_us: tuple[float, float]  # (uniform, shared)

    def speedups(self, mode: str) -> tuple[float, float]:
        uniform, shared = self.ours_us[mode]
        return self.vllm_us[0] / uniform, self.vllm_us[1] / shared

    def passes(self, mode: str, min_speedup: float) -> bool:
        return all(s >= min_speedup for s in self.speedups(mode))

    def faster(self, routing: int) -> str:
        return min(MODES, key=lambda mode: self.ours_us[mode][routing])


def read_points(csv_path: Path) -> list[ModePoint]:
    """Rows that carry both modes under both routings and vLLM's two times; others are not evidence here."""
    points = []
    with csv_path.open() as f:
        for row in csv.DictReader(f):
            times = {c: _number(row, c) for c in (
                "ours_pair_us", "ours_pair_shared_us", "ours_scan_us", "ours_scan_shared_us", "vllm_us",
                "vllm_shared_us")}  # fmt: skip
            if any(v is None for v in times.values()):
                continue
            t = {k: float(v) for k, v in times.items() if v is not None}
            points.append(ModePoint(
                shape=row["shape"], m=int(row["M"]), shipped_mode=(row.get("mode") or "?").split("/")[0].lower(),
                ours_us={mode: (t[f"ours_{mode}_us"], t[f"ours_{mode}_shared_us"]) for mode in MODES},
                vllm_us=(t["vllm_us"], t["vllm_shared_us"]),
            ))  # fmt: skip
    return points


def added_points(points: list[ModePoint], min_speedup: float) -> list[tuple[ModePoint, str]]:
    """(point, mode) where a mode passes the rule: what a per-shape crossover could send to our kernel."""
    return [(p, mode) for p in points for mode in MODES if p.passes(mode, min_speedup)]


def shipped_ranges(table_path: Path = DISPATCH_FILE) -> dict[str, list[list[int]]]:
    """shape key → the M ranges the shipped dispatch table gives our kernel."""
    return {row["shape"]: row["token_ranges"] for row in json.loads(table_path.read_text())["rows"]}


def in_ranges(m: int, ranges: list[list[int]]) -> bool:
    return any(lo <= m <= hi for lo, hi in ranges)


def _where(p: ModePoint, mode: str, shipped: dict[str, list[list[int]]]) -> str:
    table = "in the shipped table" if in_ranges(p.m, shipped.get(p.shape, [])) else "NOT in the shipped table"
    return f"{p.shape} M = {p.m} ({mode.upper()}, {table})"


def markdown(points: list[ModePoint], min_speedup: float, source: str,
             shipped: dict[str, list[list[int]]]) -> str:  # fmt: skip
    lines = [
        f"PAIR vs SCAN of `ops.fused_moe_fp8`, both forced, from `{source}` "
        f"(`python -m benchmarks.kernels.pair_scan_crossover`). µs per MoE layer, uniform / all tokens on the same "
        f'experts; "passes" = at least {min_speedup}× faster than vLLM\'s kernel (tuned tiles) under both routings, '
        "the dispatch table's rule.",
        "",
        "| shape | M | shipped mode | PAIR µs | SCAN µs | vLLM µs | faster (uniform / shared) | PAIR ÷ vLLM "
        "| SCAN ÷ vLLM | passes |",
        "|---|---:|---|---|---|---|---|---|---|---|",
    ]
    for p in points:
        pair, scan = p.ours_us["pair"], p.ours_us["scan"]
        ratios = {mode: "{:.3f} / {:.3f}".format(*p.speedups(mode)) for mode in MODES}
        passing = [mode.upper() for mode in MODES if p.passes(mode, min_speedup)] or ["neither"]
        lines.append(
            f"| {p.shape} | {p.m} | {p.shipped_mode.upper()} | {pair[0]:.1f} / {pair[1]:.1f} "
            f"| {scan[0]:.1f} / {scan[1]:.1f} | {p.vllm_us[0]:.1f} / {p.vllm_us[1]:.1f} "
            f"| {p.faster(0).upper()} / {p.faster(1).upper()} | {ratios['pair']} | {ratios['scan']} "
            f"| {', '.join(passing)} |"
        )
    passing = [_where(p, mode, shipped) for p, mode in added_points(points, min_speedup)]
    misses = [
        f"{p.shape} M = {p.m} ({p.shipped_mode.upper()}: {p.ours_us[p.shipped_mode][0]:.1f} µs, "
        f"{p.faster(0).upper()}: {p.ours_us[p.faster(0)][0]:.1f})"
        for p in points
        if p.shipped_mode in MODES and p.faster(0) != p.shipped_mode
    ]
    lines += [
        "",
        f"Where either mode passes: {', '.join(passing) or 'nowhere'}.",
        f"Where the shipped crossover picks the slower mode under uniform routing: {', '.join(misses) or 'nowhere'}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--min-speedup", type=float, default=DEFAULT_MIN_SPEEDUP)
    args = ap.parse_args(argv)
    points = read_points(args.csv)
    if not points:
        print(f"pair_scan_crossover: {args.csv} has no row with both modes under both routings "
              "(ours_pair_us, ours_scan_us, their _shared_us, vllm_us, vllm_shared_us)", file=sys.stderr)  # fmt: skip
        return 2
    try:
        source = str(args.csv.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        source = str(args.csv)
    text = markdown(points, args.min_speedup, source, shipped_ranges())
    args.out.write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
