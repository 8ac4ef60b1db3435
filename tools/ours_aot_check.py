"""GPU proof of our kernel's bake: run ops.fused_moe_fp8 as the engine plugin calls it, for every case
``python -m ops.fused_moe_fp8_aot --bake`` baked, and count Triton JIT compilations (H200).

    CUDA_VISIBLE_DEVICES= python -m ops.fused_moe_fp8_aot --bake DIR     # the bake, as the image's aot stage does
    python -m tools.ours_aot_check --cache-dir DIR [--shapes ...] [--json-out FILE]

The inputs are what entrypoint.moe_plugin.triton_experts.run_project_kernel passes: bf16 activations, int32 ids,
float32 router weights, the layer's FP8 weights and float32 scales ((1,) static activation scales, 128-blocks),
an output of the activations' dtype. Exit 0 only when none of our kernels compiled: every launch was a cache load.
Against an empty cache the same command must exit 1 (the control that the count can fire).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from kernels.dispatch import DISPATCH_FILE, DispatchTable
from tools.compile_counter import CompileCounter

KERNELS = ("moe_gemm1_kernel", "moe_gemm2_kernel", "moe_sum_kernel")


def _ours(book: dict[str, int]) -> int:
    return sum(book.get(name, 0) for name in KERNELS)


def check(cache_dir: Path, table: DispatchTable, shapes: set[str] | None) -> dict[str, object]:
    os.environ["TRITON_CACHE_DIR"] = str(cache_dir.resolve())  # before Triton's cache manager first looks
    import torch

    from kernel_checks.problems import fused_moe_problem
    from ops.fused_moe_fp8 import fused_moe_fp8
    from ops.fused_moe_fp8_aot import table_cases

    cases = table_cases(table, shapes)
    per_case: dict[str, int] = {}
    t0 = time.perf_counter()
    with CompileCounter() as counter:
        for name, m, e, k, h, inter, scales, static, gated, dtype in cases:
            before = _ours(counter.misses)
            args, kwargs = fused_moe_problem(
                m, e, k, h, inter, scales=scales, static=static, dtype=dtype, gated=gated, device="cuda"
            )
            fused_moe_fp8(*args, **kwargs, out=torch.empty_like(args[0]))
            torch.cuda.synchronize()
            per_case[name] = _ours(counter.misses) - before
            del args, kwargs
            torch.cuda.empty_cache()
    return {
        "cache_dir": str(cache_dir),
        "cases": len(cases),
        "jit_compiles": _ours(counter.misses),
        "cache_loads": _ours(counter.hits),
        "other_compiles": {n: v for n, v in counter.misses.items() if n not in KERNELS},
        "jit_per_case": per_case,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache-dir", type=Path, required=True)
    ap.add_argument("--table", type=Path, default=DISPATCH_FILE)
    ap.add_argument("--shapes", default="", help="only these table rows (benchmark shape ids, comma-separated)")
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args(argv)
    result = check(args.cache_dir, DispatchTable.load(args.table), {s for s in args.shapes.split(",") if s} or None)
    text = json.dumps(result, indent=1)
    print(text)
    if args.json_out:
        args.json_out.write_text(text + "\n")
    return 0 if result["jit_compiles"] == 0 and result["cases"] else 1


if __name__ == "__main__":
    sys.exit(main())
