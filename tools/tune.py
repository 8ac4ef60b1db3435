"""Tune vLLM's Triton fused-MoE tiles for H200 and write the image's vLLM-named config files (kernels/configs/).

The search itself is kernels/tuning/search.py (shipped: `python -m entrypoint tune` runs it on a user's GPU).

    python -m tools.tune --shapes qwen3-30b-a3b:tp1,deepseek-v3:tp8 --budget-s 420 --state $OUT/tune.jsonl

Flow per shape: for each M (decode sizes first) → pruned candidate tiles around vLLM's incumbent
(its shipped file entry, else its default heuristic) plus swap-AB tiles → all candidates' kernel
variants compiled ahead of time in a process pool (kernels/aot.py, no GPU work) → each candidate timed
once (CUDA-graph replays, kernels/tuning/moe_harness.py) → the best few and the incumbent re-timed in
interleaved rounds (run-to-run noise on identical tiles reaches ~8%) → a challenger replaces the
incumbent only when its median beats it by more than ``--margin``. M values not reached within the
budget keep the incumbent, so a written file is never worse than what vLLM runs without it.
Every measurement is appended to the ``--state`` JSONL file; a rerun skips what is already there.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kernels.config_files import CONFIG_DIR, M_GRID, Tile, load_provenance
from kernels.shapes import SHIPPED, KernelShape, shape_by_key
from kernels.tuning.search import M_ORDER, Tuner, TuneState, candidate_tiles, write_shape
from tools.measure import gpu_name, versions

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
    from kernels.tuning import moe_harness
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
