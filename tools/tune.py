"""Tune vLLM's Triton fused-MoE tiles for H200 and write vLLM-named config files.

    python -m tools.tune --shapes qwen3-30b-a3b:tp1,deepseek-v3:tp8 --budget-s 420 --state $OUT/tune.jsonl

Flow per shape: for each M (decode sizes first) → pruned candidate tiles around vLLM's incumbent
(its shipped file entry, else its default heuristic) plus swap-AB tiles → all candidates' kernel
variants compiled ahead of time in a process pool (kernels/aot.py, no GPU work) → each candidate timed
once (CUDA-graph replays, tools/moe_harness.py + tools/measure.py) → the best few and the incumbent re-timed in
interleaved rounds (run-to-run noise on identical tiles reaches ~8%) → a challenger replaces the
incumbent only when its median beats it by more than ``--margin``. M values not reached within the
budget keep the incumbent, so a written file is never worse than what vLLM runs without it.
Every measurement is appended to the ``--state`` JSONL file; a rerun skips what is already there.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernels.config_files import (
    CONFIG_DIR,
    M_GRID,
    TILE_KEYS,
    Tile,
    config_file_name,
    load_provenance,
    save_provenance,
    tile_problems,
    write_config_file,
)
from kernels.shapes import SHIPPED, KernelShape, shape_by_key
from tools.measure import gpu_name, versions

# Decode sizes first: they are what the tuning is for (the goal is M ≤ 64).
M_ORDER = (1, 2, 4, 8, 16, 32, 64, 24, 48, 96, 128, 256, 512, 1024, 2048, 4096)


def tile_id(tile: Mapping[str, int]) -> str:
    """Compact stable id: ``m16n128k128g1w4s4``."""
    t = tile
    return (
        f"m{t['BLOCK_SIZE_M']}n{t['BLOCK_SIZE_N']}k{t['BLOCK_SIZE_K']}"
        f"g{t['GROUP_SIZE_M']}w{t['num_warps']}s{t['num_stages']}"
    )


def tokens_per_active_expert(shape: KernelShape, m: int) -> float:
    """Expected rows an active expert gets with uniform routing (≥ 1)."""
    active = shape.e * (1 - (1 - shape.topk / shape.e) ** m)
    return max(1.0, m * shape.topk / active)


def _pow2_ceil(x: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(x, 1.0))))


def candidate_tiles(shape: KernelShape, m: int, incumbent: Tile, limit: int | None = None) -> list[Tile]:
    """Pruned tiles for (shape, M), incumbent first; at most ``limit`` (40 for M ≤ 256, 16 above).

    Pruning, each rule a tile that cannot win:
    - BLOCK_SIZE_M above 2× the next power of two of the rows an expert gets only pads with masked rows;
      below 64 it is also pointless once experts get ≥ 128 rows (too many tiny blocks);
    - BLOCK_SIZE_M < 64 pairs with BLOCK_SIZE_N ≥ 64 (vLLM's swap-AB on SM90: wgmma's 64-row side is N)
      plus N = 32 (non-swap, as in some of vLLM's own H200 files);
    - BLOCK_SIZE_K ∈ {128, 256} for per-tensor FP8 (64 FP8 bytes is under one 128-byte line), 128 for block
      FP8 (one scale per K step), never above the smaller K of the two GEMMs (N for GEMM2);
    - 8 warps only for tiles of ≥ 4096 outputs with a ≥ 128 side; GROUP_SIZE_M > 1 only when an expert has
      several M blocks; pipelines over the shared-memory limit are dropped.
    Beyond ``limit`` the tiles closest to the incumbent (log-distance in N, stages, K, warps) are kept.
    """
    limit = limit or (40 if m <= 256 else 16)
    rows = tokens_per_active_expert(shape, m)
    bm_hi = max(16, min(128, 2 * _pow2_ceil(rows)))
    bm_lo = 64 if rows >= 128 else 16
    bms = [b for b in (16, 32, 64, 128) if bm_lo <= b <= bm_hi]
    bks = [128] if shape.block_shape else [128, 256]
    bks = [k for k in bks if k <= min(shape.h, shape.n)] or [min(bks)]
    stages = (3, 4, 5) if rows <= 16 else (3, 4)
    out: list[Tile] = []
    for bm in bms:
        bns = (32, 64, 128, 256) if bm < 64 else (64, 128, 256)
        if shape.block_shape:
            bns = tuple(b for b in bns if b <= shape.block_shape[0] and b >= 64) or (64,)
        groups = (1,) if rows <= 2 * bm else (1, 16)
        for bn in bns:
            warps = (4, 8) if bm * bn >= 4096 and max(bm, bn) >= 128 else (4,)
            for bk, st, w, g in itertools.product(bks, stages, warps, groups):
                tile = dict(zip(TILE_KEYS, (bm, bn, bk, g, w, st), strict=True))
                if not tile_problems(tile, shape.block_shape):
                    out.append(tile)

    def distance(t: Tile) -> tuple[float, ...]:
        inc = incumbent
        return (
            abs(math.log2(t["BLOCK_SIZE_N"]) - math.log2(inc["BLOCK_SIZE_N"])),
            abs(math.log2(t["BLOCK_SIZE_M"]) - math.log2(inc["BLOCK_SIZE_M"])),
            abs(t["num_stages"] - inc["num_stages"]),
            float(t["BLOCK_SIZE_K"] != inc["BLOCK_SIZE_K"]),
            float(t["num_warps"] != inc["num_warps"]),
            float(t["GROUP_SIZE_M"] != inc["GROUP_SIZE_M"]),
        )

    out.sort(key=distance)
    chosen = [dict(incumbent)]
    seen = {tile_id(incumbent)}
    for t in out:
        if len(chosen) >= limit:
            break
        if tile_id(t) not in seen:
            seen.add(tile_id(t))
            chosen.append(t)
    return chosen


@dataclass
class TuneState:
    """Append-only JSONL of measurements; the resume point of an interrupted run."""

    path: Path | None
    screen: dict[tuple[str, int, str], float] = field(default_factory=dict)
    final: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path | None) -> TuneState:
        st = cls(path)
        if path is None or not path.exists():
            return st
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a kill: ignore, it will be re-measured
            if rec.get("kind") == "screen":
                st.screen[(rec["shape"], rec["m"], rec["tile_id"])] = rec["us"]
            elif rec.get("kind") == "final":
                st.final[(rec["shape"], rec["m"])] = rec
        return st

    def _append(self, rec: dict[str, Any]) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            f.write(json.dumps(rec) + "\n")

    def add_screen(self, shape: str, m: int, tile: Tile, us: float) -> None:
        self.screen[(shape, m, tile_id(tile))] = us
        self._append({"kind": "screen", "shape": shape, "m": m, "tile_id": tile_id(tile), "tile": tile, "us": us})

    def add_final(self, shape: str, m: int, rec: dict[str, Any]) -> None:
        rec = {"kind": "final", "shape": shape, "m": m, **rec}
        self.final[(shape, m)] = rec
        self._append(rec)


def pick_winner(medians: Mapping[str, float], incumbent_id: str, margin: float) -> str:
    """Fastest tile, unless the incumbent is within ``margin`` of it (then the incumbent stays)."""
    best = min(medians, key=lambda k: medians[k])
    if best != incumbent_id and medians[incumbent_id] <= medians[best] * (1 + margin):
        return incumbent_id
    return best


Measure = Callable[[KernelShape, int, Tile, int], float]  # (shape, M, tile, batches) -> µs


@dataclass
class Tuner:
    """The search loop, independent of how a tile is timed (GPU timer on the H200, a fake in tests)."""

    measure: Measure
    state: TuneState
    deadline: float  # time.monotonic() value
    incumbent_for: Callable[[KernelShape, int], Tile]
    top: int = 4
    rounds: int = 3
    margin: float = 0.02
    clock: Callable[[], float] = time.monotonic
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr)

    def out_of_time(self) -> bool:
        return self.clock() >= self.deadline

    def tune_m(self, shape: KernelShape, m: int) -> dict[str, Any] | None:
        """Screen + re-measure one M; None when the deadline cut it short (nothing final recorded)."""
        done = self.state.final.get((shape.key, m))
        if done:
            return done
        incumbent = self.incumbent_for(shape, m)
        tiles = candidate_tiles(shape, m, incumbent)
        by_id = {tile_id(t): t for t in tiles}
        for t in tiles:
            key = (shape.key, m, tile_id(t))
            if key in self.state.screen:
                continue
            if self.out_of_time():
                return None
            try:
                us = self.measure(shape, m, t, 1)
            except Exception as exc:  # a tile the compiler rejects (resources) just loses
                self.log(f"{shape.key} M={m} {tile_id(t)}: {type(exc).__name__}: {exc}")
                us = math.inf
            self.state.add_screen(shape.key, m, t, us)
        screened = {tid: self.state.screen[(shape.key, m, tid)] for tid in by_id}
        finalists = sorted((tid for tid in screened if math.isfinite(screened[tid])), key=screened.get)[: self.top]
        inc_id = tile_id(incumbent)
        if inc_id not in finalists:
            finalists.append(inc_id)
        samples: dict[str, list[float]] = {tid: [] for tid in finalists}
        for _ in range(self.rounds):  # interleaved rounds: drift hits every finalist alike
            for tid in finalists:
                if self.out_of_time():
                    return None
                samples[tid].append(self.measure(shape, m, by_id[tid], 3))
        medians = {tid: sorted(v)[len(v) // 2] for tid, v in samples.items()}
        win = pick_winner(medians, inc_id, self.margin)
        rec = {
            "tile": by_id[win],
            "tile_id": win,
            "us": medians[win],
            "incumbent": incumbent,
            "incumbent_us": medians[inc_id],
            "speedup": medians[inc_id] / medians[win],
            "candidates": len(tiles),
        }
        self.state.add_final(shape.key, m, rec)
        rec = self.state.final[(shape.key, m)]  # same record a resumed run returns
        self.log(
            f"{shape.key:28s} M={m:5d} {win:22s} {medians[win]:9.1f} µs  "
            f"incumbent {medians[inc_id]:9.1f} µs  x{rec['speedup']:.3f}"
        )
        return rec

    def tune_shape(self, shape: KernelShape, ms: Iterable[int]) -> dict[int, dict[str, Any]]:
        out = {}
        for m in ms:
            rec = self.tune_m(shape, m)
            if rec is None:
                break
            out[m] = rec
        return out


def build_table(
    shape: KernelShape, finals: Mapping[int, Mapping[str, Any]], incumbent_for: Callable[[KernelShape, int], Tile]
) -> dict[int, Tile]:
    """Every M of the grid: the tuned tile where measured, vLLM's incumbent elsewhere."""
    table = {}
    for m in M_GRID:
        tile = finals[m]["tile"] if m in finals else incumbent_for(shape, m)
        table[m] = {k: int(tile[k]) for k in TILE_KEYS}
    return table


def write_shape(
    shape: KernelShape,
    finals: Mapping[int, Mapping[str, Any]],
    incumbent_for: Callable[[KernelShape, int], Tile],
    out_dir: Path,
    versions: Mapping[str, str],
    command: str,
) -> Path:
    """Write the vLLM-named file and its provenance row."""
    name = config_file_name(shape.e, shape.n, shape.dtype, shape.block_shape)
    path = out_dir / name
    write_config_file(path, build_table(shape, finals, incumbent_for), versions.get("triton", "unknown"))
    prov_path = out_dir / "provenance.json"
    prov = load_provenance(prov_path)
    prov[name] = {
        "shape": shape.key,
        "E": shape.e,
        "N": shape.n,
        "H": shape.h,
        "topk": shape.topk,
        "dtype": shape.dtype,
        "block_shape": shape.block_shape,
        "tuned_m": sorted(finals),
        "untuned_m_use": "vLLM's shipped tile if vLLM ships this file, else vLLM's default heuristic",
        "speedup_vs_incumbent": {str(m): round(float(r["speedup"]), 4) for m, r in sorted(finals.items())},
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": command,
        **{f"{k}_version": v for k, v in versions.items()},
    }
    save_provenance(prov, prov_path)
    return path


README_HEAD = """# Tuned H200 tiles for vLLM's Triton fused-MoE kernel

vLLM-named files (`E=..,N=..,device_name=NVIDIA_H200,dtype=fp8_w8a8[,block_shape=[128,128]].json`),
read by vLLM when `VLLM_TUNED_CONFIG_FOLDER` points here (the resolver sets it when the Triton MoE
backend runs). Each file maps batch size M → tile; vLLM uses the entry with the closest M. M values
not in "tuned M" carry vLLM's own tile for that M (its shipped file's entry, else its default
heuristic), so a file is never worse than no file. Generated from `provenance.json` by
`python -m tools.tune --write-readme`; regenerate the files with
`benchmarks/device/tune_and_bench.sh tune` on an H200 (see kernels/README.md).

| file | shape | tuned M | best speedup vs vLLM (M) | GPU | vLLM | Triton | date | command |
|---|---|---|---|---|---|---|---|---|
"""


def render_readme(prov: Mapping[str, Mapping[str, Any]]) -> str:
    """kernels/configs/README.md: one row per shipped file, from provenance.json."""
    rows = []
    for name, p in sorted(prov.items(), key=lambda kv: kv[1]["shape"]):
        sp = {int(m): v for m, v in p.get("speedup_vs_incumbent", {}).items()}
        best = max(sp.items(), key=lambda kv: kv[1]) if sp else None
        best_s = f"{best[1]:.3f} ({best[0]})" if best else "-"
        tuned = ",".join(map(str, p["tuned_m"]))
        rows.append(
            f"| `{name}` | {p['shape']} | {tuned} | {best_s} | {p.get('gpu_version', '?')} | "
            f"{p.get('vllm_version', '?')} | {p.get('triton_version', '?')} | {p['date'][:10]} | `{p['command']}` |"
        )
    return README_HEAD + "\n".join(rows) + "\n"


def _versions() -> dict[str, str]:
    """What produced a file (its provenance row): the same fields every benchmark row carries."""
    return {**versions(("triton", "vllm", "torch")), "gpu": gpu_name()}


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tools.tune", description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default="", help="comma-separated keys like qwen3-30b-a3b:tp1 (default: all shipped)")
    p.add_argument("--m", default=",".join(map(str, M_ORDER)), help="batch sizes, in tuning order")
    p.add_argument("--budget-s", type=float, default=420.0, help="stop measuring after this; write what finished")
    p.add_argument("--state", type=Path, default=None, help="JSONL of measurements (resume file)")
    p.add_argument("--out-dir", type=Path, default=CONFIG_DIR)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="AOT compile processes")
    p.add_argument("--top", type=int, default=4, help="finalists re-measured besides the incumbent")
    p.add_argument("--margin", type=float, default=0.02, help="challenger must beat the incumbent by this")
    p.add_argument("--write-readme", action="store_true", help="only render --out-dir/README.md from provenance")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    if args.write_readme:
        (args.out_dir / "README.md").write_text(render_readme(load_provenance(args.out_dir / "provenance.json")))
        return 0
    t0 = time.monotonic()
    deadline = t0 + args.budget_s
    shapes = [shape_by_key(s) for s in args.shapes.split(",") if s] or list(SHIPPED)
    ms = [int(x) for x in args.m.split(",") if x]
    bad = [m for m in ms if m not in M_GRID]
    if bad:
        print(f"--m values {bad} not in the tuning grid {list(M_GRID)}", file=sys.stderr)
        return 2

    from kernels import aot
    from tools import moe_harness
    from tools.compile_counter import CompileCounter

    shipped = {s.key: moe_harness.vllm_shipped_table(s) for s in shapes}
    incumbent_cache: dict[tuple[str, int], Tile] = {}

    def incumbent_for(shape: KernelShape, m: int) -> Tile:
        key = (shape.key, m)
        if key not in incumbent_cache:
            incumbent_cache[key] = moe_harness.incumbent_tile(shape, m, shipped[shape.key])
        return incumbent_cache[key]

    # Triton compile is the bottleneck: every candidate's kernels are compiled in a process pool before
    # they are timed, and the next shape's compiles run while this shape is being timed. The timing
    # process then only loads cubins from the cache ("jit_compiles_during_timing" should stay empty).
    pool = aot.CompilePool(args.workers)

    def submit(shape: KernelShape) -> list:
        cases = [aot.Case.of(shape, m, t) for m in ms for t in candidate_tiles(shape, m, incumbent_for(shape, m))]
        return pool.submit(cases, paths=("functional", "both"))

    pending = {shapes[0].key: submit(shapes[0])}
    n_variants = 0
    problems: dict[str, moe_harness.MoEProblem] = {}
    timers: dict[tuple[str, int], moe_harness.GraphTimer] = {}

    def measure(shape: KernelShape, m: int, tile: Tile, batches: int) -> float:
        if shape.key not in problems:
            problems.clear()  # one shape's weights at a time
            timers.clear()
            problems[shape.key] = moe_harness.MoEProblem(shape)
        if (shape.key, m) not in timers:
            timers[(shape.key, m)] = moe_harness.GraphTimer(problems[shape.key], m)
        return timers[(shape.key, m)].measure(tile, batches=batches)

    state = TuneState.load(args.state)
    tuner = Tuner(measure, state, deadline, incumbent_for, top=args.top, margin=args.margin)
    versions = _versions()
    command = "python -m tools.tune " + " ".join(argv if argv is not None else sys.argv[1:])
    written = []
    counter = CompileCounter().__enter__()
    for i, shape in enumerate(shapes):
        n_variants += aot.wait_all(pending.pop(shape.key), f"compile {shape.key}")
        if i + 1 < len(shapes):
            pending[shapes[i + 1].key] = submit(shapes[i + 1])
        finals = tuner.tune_shape(shape, ms)
        if finals:
            written.append(write_shape(shape, finals, incumbent_for, args.out_dir, versions, command))
        if tuner.out_of_time():
            break
    counter.__exit__()
    pool.close()
    summary = {
        "written": [p.name for p in written],
        "seconds": round(time.monotonic() - t0, 1),
        "aot_variants": n_variants,
        # fused_moe_kernel misses here mean the AOT keys did not match the JIT's (tuning still works, slower)
        "jit_compiles_during_timing": counter.misses,
        "cache_loads_during_timing": counter.hits,
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
