"""Compile our fused-MoE kernels for sm_90 on a machine with no GPU: a check, and the image's bake.

Triton's CPU interpreter accepts code the real compiler refuses (plain float globals, dot shapes,
scalar atomics in branches, ...). `compile_all()` runs every launch `fused_moe_fp8` would make for a
set of configurations through Triton's JIT under kernels.aot.Sm90Driver (target cuda:90, meta
tensors, nothing runs), so such errors show up in `make test`. Run it in a process with
TRITON_INTERPRET unset and the H200's Triton (3.7.1, build/triton-3.7.1) first on sys.path:

    PYTHONPATH=build/triton-3.7.1:. CUDA_VISIBLE_DEVICES= python -m ops.fused_moe_fp8_aot

`bake(cache_dir, table)` compiles exactly the launches the engine plugin makes (entrypoint.moe_plugin: bf16 input,
the row's scale kind and activation, `default_config`) at every M of every dispatch-table row into a Triton cache:
the image's aot stage runs it (docker/aot_cache.sh) next to vLLM's kernels, so our kernel is not JIT-compiled when
vLLM first runs each captured batch size at engine start:

    python -m ops.fused_moe_fp8_aot --bake CACHE_DIR [--table FILE] [--shapes qwen3-30b-a3b:tp1,...]

Whether the real launches hit these entries is checked on the H200 only (counted compiles at a baked start).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

from kernels.dispatch import DISPATCH_FILE, DispatchTable

# (name, T, E, k, H, I, scales, static, gated, dtype): every constexpr branch of both kernels
CASES: tuple[tuple[Any, ...], ...] = (
    ("qwen3-m1-pair-tensor-static", 1, 128, 8, 2048, 768, "tensor", True, True, torch.bfloat16),
    ("qwen3-m1-pair-tensor-dynamic", 1, 128, 8, 2048, 768, "tensor", False, True, torch.bfloat16),
    ("dsv3-m1-pair-block-dynamic", 1, 256, 8, 7168, 256, "block", False, True, torch.bfloat16),
    ("maverick-m1-pair-top1-channel", 1, 128, 1, 5120, 1024, "channel", False, True, torch.bfloat16),
    ("nemotron-m1-pair-relu2", 1, 128, 6, 2688, 1856, "tensor", True, False, torch.float16),
    ("qwen3-m64-scan-tensor-dynamic", 64, 128, 8, 2048, 768, "tensor", False, True, torch.bfloat16),
    ("dsv3-m64-scan-block-static", 64, 256, 8, 7168, 256, "block", True, True, torch.bfloat16),
)
# (case name, scoring, selection bias): the same launches routed from the router's logits (issue 33's fold): the
# route_slot prologue in both PAIR-mode GEMMs, and moe_route_kernel before SCAN mode
FOLDED: tuple[tuple[str, str, bool], ...] = (
    ("qwen3-m1-pair-tensor-static", "softmax", False),
    ("nemotron-m1-pair-relu2", "sigmoid", True),
    ("qwen3-m64-scan-tensor-dynamic", "softmax", False),
)
# PAIR-mode cases also compiled with the atomic top-k sum (MoEKernelConfig.atomic_sum, a bench comparison)
ATOMIC: tuple[str, ...] = ("qwen3-m1-pair-tensor-static",)
# (case name, scoring, selection bias): folded and with GEMM1 under PDL (MoEKernelConfig.pdl_gemm1), the e2e harness's
# plan_fold_pdl row
FOLDED_PDL_GEMM1: tuple[tuple[str, str, bool], ...] = (
    ("qwen3-m1-pair-tensor-static", "softmax", False),
    ("nemotron-m1-pair-relu2", "sigmoid", True),
)


class _MetaLauncher:
    """Stands in for `kernel[grid]`: records (kernel, grid, args, kwargs) instead of launching."""

    def __init__(self, calls: list, kernel: Any) -> None:
        self.calls, self.kernel = calls, kernel

    def __getitem__(self, grid: tuple[int, ...]) -> Any:
        def launch(*args: Any, **kwargs: Any) -> None:
            self.calls.append((self.kernel, grid, args, kwargs))

        return launch


def launches(
    case: tuple[Any, ...], config: Any = None, fold: tuple[str, bool] | None = None
) -> list[tuple[Any, tuple, tuple, dict]]:
    """The kernel launches of fused_moe_fp8 for `case`, captured with meta tensors (no device work); `fold`:
    (scoring, bias) to route from meta router logits instead of precomputed ids."""
    from ops import fused_moe_fp8 as F
    from ops import fused_moe_fp8_kernels as K
    from ops.moe_routing import LogitsRouting

    _, t, e, k, h, inter, scales, static, gated, dtype = case
    n1 = 2 * inter if gated else inter
    meta = dict(device="meta")
    x = torch.empty(t, h, dtype=dtype, **meta)
    w13 = torch.empty(e, n1, h, dtype=torch.float8_e4m3fn, **meta)
    w2 = torch.empty(e, h, inter, dtype=torch.float8_e4m3fn, **meta)
    w = torch.empty(t, k, dtype=torch.float32, **meta)
    ids = torch.empty(t, k, dtype=torch.int32, **meta)
    f32 = dict(dtype=torch.float32, **meta)
    if scales == "block":
        s13, s2 = (
            torch.empty(e, -(-n1 // 128), -(-h // 128), **f32),
            torch.empty(e, -(-h // 128), -(-inter // 128), **f32),
        )
    elif scales == "channel":
        s13, s2 = torch.empty(e, n1, **f32), torch.empty(e, h, **f32)
    else:
        s13, s2 = torch.empty(e, **f32), torch.empty(e, **f32)
    kw: dict[str, Any] = dict(w13_scale=s13, w2_scale=s2, block_shape=[128, 128] if scales == "block" else None)
    if static:
        kw.update(a13_scale=torch.empty(1, **f32), a2_scale=torch.empty(1, **f32))
    if fold is not None:
        kw["routing"] = LogitsRouting(
            torch.empty(t, e, dtype=dtype, **meta), k, fold[0], bias=torch.empty(e, **f32) if fold[1] else None
        )
    calls: list = []
    modules = {"moe_gemm1_kernel": K, "moe_gemm2_kernel": K, "moe_sum_kernel": K, "moe_route_kernel": F}
    saved = {n: getattr(module, n) for n, module in modules.items()}
    try:
        for n, fn in saved.items():
            setattr(modules[n], n, _MetaLauncher(calls, fn))
        F.fused_moe_fp8(x, w13, w2, w, ids, **kw, activation="silu" if gated else "relu2", config=config)
    finally:
        for n, fn in saved.items():
            setattr(modules[n], n, fn)
    return calls


def _compile_for_sm90(runs: list[tuple[Any, ...]]) -> int:
    """Warm up every launch of each (case, config[, fold]) under the GPU-less sm_90 driver; how many compiled."""
    from triton.runtime.driver import driver

    from kernels.aot import Sm90Driver

    driver.set_active(Sm90Driver())
    compiled = 0
    for case, config, *fold in runs:
        for kernel, grid, args, kwargs in launches(case, config, *fold):
            kernel.warmup(*args, grid=grid, **kwargs)
            compiled += 1
    return compiled


def compile_all(with_candidates: bool = False) -> dict[str, Any]:
    """Compile every launch of CASES (and optionally every candidate config) for sm_90."""
    from ops import fused_moe_fp8 as F

    runs: list[tuple[Any, ...]] = []
    for case in CASES:
        _, t, e, k, h, inter, *_ = case
        configs = [None, *(F.candidate_configs(t, e, k, h, inter) if with_candidates else ())]
        runs += [(case, cfg) for cfg in configs]
    by_name = {case[0]: case for case in CASES}
    runs += [(by_name[name], None, (scoring, bias)) for name, scoring, bias in FOLDED]
    for name in ATOMIC:
        _, t, e, k, h, inter, *_ = by_name[name]
        runs.append((by_name[name], dataclasses.replace(F.default_config(t, e, k, h, inter), atomic_sum=True)))
    for name, scoring, bias in FOLDED_PDL_GEMM1:
        _, t, e, k, h, inter, *_ = by_name[name]
        pdl1 = dataclasses.replace(F.default_config(t, e, k, h, inter), pdl_gemm1=True)
        runs.append((by_name[name], pdl1, (scoring, bias)))
    t0 = time.perf_counter()
    return {"launches": _compile_for_sm90(runs), "seconds": round(time.perf_counter() - t0, 1)}


def table_cases(table: DispatchTable, shapes: set[str] | None = None) -> list[tuple[Any, ...]]:
    """One CASES-style case per (row, M) the table sends to our kernel, as the plugin calls it."""
    cases = []
    for row in table.rows.values():
        if shapes and row.shape not in shapes:
            continue
        key = row.key
        scales, static = ("block", False) if key.scales == "block-dynamic" else ("tensor", True)
        for lo, hi in row.token_ranges:
            for m in range(lo, hi + 1):
                cases.append((f"{row.shape}-m{m}", m, key.experts, key.top_k, key.hidden, key.n, scales, static,
                              row.activation == "silu", torch.bfloat16))  # fmt: skip
    return cases


def bake(cache_dir: Path, table: DispatchTable, shapes: set[str] | None = None) -> dict[str, Any]:
    """Compile every launch of `table_cases` into the Triton cache at cache_dir (its path as the image runs it)."""
    os.environ["TRITON_CACHE_DIR"] = str(cache_dir)  # read by Triton's cache manager at each compile
    cases, t0 = table_cases(table, shapes), time.perf_counter()
    compiled = _compile_for_sm90([(case, None) for case in cases])  # None: default_config, as the plugin runs it
    return {"cases": len(cases), "launches": compiled, "seconds": round(time.perf_counter() - t0, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bake", type=Path, metavar="CACHE_DIR", help="compile the dispatch table's launches into it")
    ap.add_argument("--table", type=Path, default=DISPATCH_FILE)
    ap.add_argument("--shapes", default="", help="only these table rows (benchmark shape ids, comma-separated)")
    ap.add_argument("--candidates", action="store_true", help="(check) also every candidate config")
    args = ap.parse_args(argv)
    if args.bake:
        shapes = {s for s in args.shapes.split(",") if s} or None
        print(json.dumps(bake(args.bake, DispatchTable.load(args.table), shapes)))
    else:
        print(json.dumps(compile_all(with_candidates=args.candidates)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
