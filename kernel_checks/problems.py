"""Random inputs for our kernels, shared by the tests, the device diagnostics and the benchmarks.

Values are never zeros (a kernel that writes nothing would match a zero reference) and are generated on the
device the kernel runs on (a real model shape's weights are GBs; making them on the CPU first would cost more than
the test). The float64 references they are compared with are in kernel_checks/reference.py.
"""

from __future__ import annotations

from typing import Any

import torch
import triton

FP8 = torch.float8_e4m3fn
BLOCK = 128  # the block of block-scaled FP8 weights (DeepSeek-V3's 128×128)


def fused_moe_problem(
    t: int,
    e: int,
    k: int,
    h: int,
    inter: int,
    *,
    scales: str,
    static: bool = False,
    dtype: torch.dtype = torch.bfloat16,
    gated: bool = True,
    ids: torch.Tensor | None = None,
    seed: int = 0,
    device: str = "cpu",
) -> tuple[tuple[torch.Tensor, ...], dict[str, Any]]:
    """((hidden, w13, w2, topk_weights, topk_ids), keyword arguments) for ``ops.fused_moe_fp8.fused_moe_fp8``.

    T tokens routed to ``k`` of ``e`` experts (uniform, or ``ids``), hidden size ``h``, expert width ``inter``.
    scales: 'tensor' (one per expert), 'channel' (per expert and output row) or 'block' (per 128×128 block);
    static: static per-tensor activation scales, else dynamic (per token). gated: SiLU·up (w13 holds 2·I rows),
    else relu² (I rows).
    """
    g = torch.Generator(device=device).manual_seed(seed)
    n1 = 2 * inter if gated else inter
    dev: dict[str, Any] = dict(generator=g, device=device)
    x = torch.randn(t, h, **dev).to(dtype)  # (T, H)
    w13 = (torch.randn(e, n1, h, **dev) * 0.5).to(FP8)  # (E, N1, H) fp8
    w2 = (torch.randn(e, h, inter, **dev) * 0.5).to(FP8)  # (E, H, I) fp8
    if ids is None:
        ids = torch.rand(t, e, **dev).topk(k, dim=1).indices.to(torch.int32)
    w = torch.rand(t, k, **dev) + 0.1  # routing weights, each row sums to 1
    w = w / w.sum(dim=1, keepdim=True)

    def scale(*shape: int) -> torch.Tensor:
        return torch.rand(*shape, **dev) * 0.01 + 0.005

    if scales == "block":
        cdiv = triton.cdiv
        s13, s2 = scale(e, cdiv(n1, BLOCK), cdiv(h, BLOCK)), scale(e, cdiv(h, BLOCK), cdiv(inter, BLOCK))
    elif scales == "channel":
        s13, s2 = scale(e, n1), scale(e, h)
    elif scales == "tensor":
        s13, s2 = scale(e), scale(e)
    else:
        raise ValueError(f"scales={scales!r}: expected 'tensor', 'channel' or 'block'")
    kw: dict[str, Any] = dict(w13_scale=s13, w2_scale=s2, block_shape=[BLOCK, BLOCK] if scales == "block" else None)
    if static:
        kw.update(a13_scale=torch.tensor([0.02], device=device), a2_scale=torch.tensor([0.05], device=device))
    kw["activation"] = "silu" if gated else "relu2"
    return (x, w13, w2, w, ids.to(device)), kw


def rope_cos_sin_cache(max_pos: int, rot: int, generator: torch.Generator, device: str = "cpu") -> torch.Tensor:
    """(max_pos, rot) float32 ``[cos | sin]`` rows of random angles, the layout vLLM's rotary cache has."""
    angles = torch.rand(max_pos, rot // 2, generator=generator, device=device) * 6.0
    return torch.cat([angles.cos(), angles.sin()], dim=-1)


def bf16_rows(rows: int, seed: int, width: int = 128) -> torch.Tensor:
    """(rows, width) float32 holding bf16 values: their quotients by a per-row amax/448 scale often fall on exact
    fp8 ties, the case an approximate division gets wrong (ops/fp8_quant.py)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, width, generator=g).to(torch.bfloat16).float()
