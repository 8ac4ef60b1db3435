"""GPU proof of the baked Triton cache: run vLLM's kernel for every case ``python -m kernels.aot bake`` baked and
count JIT compilations (H200; ``benchmarks/device/tune_and_bench.sh aotcheck``).

    python -m tools.aot_check --cache-dir /opt/moe-serving/triton-cache [--shapes ...] [--json-out FILE]

vLLM's own config lookup reads our folder (``VLLM_TUNED_CONFIG_FOLDER``), so the tiles are the ones the engine
loads. Exit 0 only when ``fused_moe_kernel`` was never compiled: every launch came from the baked cache. Against an
empty cache the same command must exit 1: the control that the count can fire. The cases are enumerated by the
bake's own code (kernels/aot.py, same options), so the check runs exactly what was baked.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from kernels.aot import add_case_arguments, selected_cases, selected_shapes, vllm_config_dir
from tools.compile_counter import CompileCounter

KERNEL = "fused_moe_kernel"


def check(args: argparse.Namespace) -> int:
    os.environ["TRITON_CACHE_DIR"] = str(args.cache_dir.resolve())
    os.environ["VLLM_TUNED_CONFIG_FOLDER"] = str(args.config_dir.resolve())
    import torch

    from kernels.tuning import moe_harness

    cases = selected_cases(args, vllm_config_dir())
    per_shape: dict[str, dict[str, int]] = {}
    t0 = time.perf_counter()
    with CompileCounter() as counter:
        for shape in selected_shapes(args):
            if not any(cs.shape_key == shape.key for cs in cases):
                continue
            before = counter.misses.get(KERNEL, 0)
            problem = moe_harness.MoEProblem(shape)
            shape_sizes = sorted({cs.m for cs in cases if cs.shape_key == shape.key})
            for m in shape_sizes:
                x, w, ids = problem.inputs(m, 1)[0]
                problem.run(x, w, ids)
            torch.cuda.synchronize()
            per_shape[shape.key] = {"sizes": len(shape_sizes), "jit": counter.misses.get(KERNEL, 0) - before}
            del problem
            torch.cuda.empty_cache()
    result = {
        "cache_dir": str(args.cache_dir),
        "cases": len(cases),
        f"{KERNEL}_jit_compiles": counter.misses.get(KERNEL, 0),
        f"{KERNEL}_cache_loads": counter.hits.get(KERNEL, 0),
        "other_compiles": {k: v for k, v in counter.misses.items() if k != KERNEL},
        "per_shape": per_shape,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.json_out:
        args.json_out.write_text(text + "\n")
    return 0 if result[f"{KERNEL}_jit_compiles"] == 0 and per_shape else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.aot_check", description=__doc__.splitlines()[0])
    add_case_arguments(p)
    p.add_argument("--json-out", type=Path, default=None)
    return check(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
