"""Compile our fused-MoE kernels for sm_90 on a machine with no GPU (a check, not a cache bake).

Triton's CPU interpreter accepts code the real compiler refuses (plain float globals, dot shapes,
scalar atomics in branches, ...). `compile_all()` runs every launch `fused_moe_fp8` would make for a
set of configurations through Triton's JIT under kernels.aot.Sm90Driver (target cuda:90, meta
tensors, nothing runs), so such errors show up in `make test`. Run it in a process with
TRITON_INTERPRET unset and the H200's Triton (3.6.0, build/triton-3.6.0) first on sys.path:

    PYTHONPATH=build/triton-3.6.0:. CUDA_VISIBLE_DEVICES= python -m ops.fused_moe_fp8_aot
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import torch

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


class _MetaLauncher:
    """Stands in for `kernel[grid]`: records (kernel, grid, args, kwargs) instead of launching."""

    def __init__(self, calls: list, kernel: Any) -> None:
        self.calls, self.kernel = calls, kernel

    def __getitem__(self, grid: tuple[int, ...]) -> Any:
        def launch(*args: Any, **kwargs: Any) -> None:
            self.calls.append((self.kernel, grid, args, kwargs))

        return launch


def launches(case: tuple[Any, ...], config: Any = None) -> list[tuple[Any, tuple, tuple, dict]]:
    """The kernel launches of fused_moe_fp8 for `case`, captured with meta tensors (no device work)."""
    from ops import fused_moe_fp8 as F
    from ops import fused_moe_fp8_kernels as K

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
    calls: list = []
    saved = {n: getattr(K, n) for n in ("moe_gemm1_kernel", "moe_gemm2_kernel", "moe_sum_kernel")}
    try:
        for n, fn in saved.items():
            setattr(K, n, _MetaLauncher(calls, fn))
        F.fused_moe_fp8(x, w13, w2, w, ids, **kw, activation="silu" if gated else "relu2", config=config)
    finally:
        for n, fn in saved.items():
            setattr(K, n, fn)
    return calls


def compile_all(with_candidates: bool = False) -> dict[str, Any]:
    """Compile every launch of CASES (and optionally every candidate config) for sm_90."""
    from triton.runtime.driver import driver

    from kernels.aot import Sm90Driver
    from ops import fused_moe_fp8 as F

    driver.set_active(Sm90Driver())
    compiled, t0 = 0, time.perf_counter()
    for case in CASES:
        _, t, e, k, h, inter, *_ = case
        configs: list[Any] = [None]
        if with_candidates:
            configs += F.candidate_configs(t, e, k, h, inter)
        for cfg in configs:
            for kernel, grid, args, kwargs in launches(case, cfg):
                kernel.warmup(*args, grid=grid, **kwargs)
                compiled += 1
    return {"launches": compiled, "seconds": round(time.perf_counter() - t0, 1)}


if __name__ == "__main__":
    print(json.dumps(compile_all(with_candidates="--candidates" in sys.argv)))
