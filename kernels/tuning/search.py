"""The Triton fused-MoE tile search, shipped with the image: `python -m entrypoint tune` and `bake-cache` run it on
the serving GPU (issue 32), and the lab's `python -m tools.tune` runs it for the image's own files.

Per shape and M (decode sizes first): pruned candidate tiles around vLLM's incumbent (its shipped file's entry, else
its default heuristic) → each timed once → the best few and the incumbent re-timed in interleaved rounds (run-to-run
noise on identical tiles reaches ~8 %) → a challenger replaces the incumbent only when its median beats it by more
than ``margin``. An M the budget did not reach keeps the incumbent, so a written file is never slower than what vLLM
runs without it, at any M, in the tuning run. Every measurement is appended to a JSONL state file; a rerun skips what
is there (the resume point of a killed run). How a tile is timed is a parameter (``Measure``): the GPU timer of
kernels/tuning/moe_harness.py on the H200, a fake in the CPU tests.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernels.config_files import (
    M_GRID,
    TILE_KEYS,
    Tile,
    config_file_name,
    load_provenance,
    save_provenance,
    tile_problems,
    write_config_file,
)
from kernels.shapes import KernelShape

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
    others: list[dict[str, Any]] = field(default_factory=list)  # records of other kinds (the dispatch check's)

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
            else:
                st.others.append(rec)
        return st

    def add_other(self, rec: dict[str, Any]) -> None:
        """A record of another kind (it has its own "kind"), kept and appended like the tile measurements."""
        self.others.append(rec)
        self._append(rec)

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
    progress: Callable[[int], None] = lambda n: None  # called with 1 after each tile timed (a progress bar's update)

    def out_of_time(self) -> bool:
        return self.clock() >= self.deadline

    def planned(self, shape: KernelShape, ms: Iterable[int]) -> int:
        """Timings left for these M values (screening + final rounds), what a resumed run has done subtracted: the
        total of a progress bar. An upper bound: a candidate the compiler rejects skips its final rounds."""
        left = 0
        for m in ms:
            if (shape.key, m) in self.state.final:
                continue
            tiles = candidate_tiles(shape, m, self.incumbent_for(shape, m))
            left += sum((shape.key, m, tile_id(t)) not in self.state.screen for t in tiles)
            left += min(len(tiles), self.top + 1) * self.rounds
        return left

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
            self.progress(1)
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
                self.progress(1)
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
    shape: KernelShape,
    finals: Mapping[int, Mapping[str, Any]],
    incumbent_for: Callable[[KernelShape, int], Tile],
    grid: Sequence[int] = M_GRID,
) -> dict[int, Tile]:
    """Every M of the grid: the tuned tile where measured, vLLM's incumbent elsewhere (vLLM picks the entry nearest
    to a batch's M, so an untuned M must carry the tile vLLM would have run there, not a neighbour's)."""
    table = {}
    for m in sorted({*grid, *finals}):
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
    grid: Sequence[int] = M_GRID,
    device_name: str = "NVIDIA H200",
) -> Path:
    """Write the vLLM-named file (for the GPU called ``device_name``) and its provenance row."""
    name = config_file_name(shape.e, shape.n, shape.dtype, shape.block_shape, device_name)
    path = out_dir / name
    out_dir.mkdir(parents=True, exist_ok=True)
    write_config_file(path, build_table(shape, finals, incumbent_for, grid), versions.get("triton", "unknown"))
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
