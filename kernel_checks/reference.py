"""Readable PyTorch references for our kernels, shared by the tests and the benchmarks.

Everything is computed in float64 on upcast inputs, with the fp8 rounding steps of the kernels
reproduced explicitly (the kernels quantise activations to float8_e4m3fn before each GEMM, so the
reference must too, or the comparison would measure quantisation, not bugs).

Scale conventions (the same as vLLM's fp8_w8a8 MoE):
- weights are stored as fp8 with `w_real = w_fp8 * scale`; scales are per expert (per-tensor),
  per expert and output row (per-channel) or per expert and 128x128 block;
- activations: a static per-tensor scale (`a_q = clamp(a / s)`), or dynamic: one scale per token row
  (per-tensor / per-channel weights) or per token and 128-wide group of K (block weights), equal to
  `amax / 448`.
"""

from __future__ import annotations

import torch

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
# Smallest dynamic scale: keeps an all-zero row from dividing by zero (vLLM uses the same idea).
MIN_SCALE = 1e-12

# One tolerance table for every kernel test: ||out - ref|| / ||ref|| must stay below this, keyed by
# the dtype of the compared output. fp8 rows are for outputs computed from fp8 operands against a
# reference that performs the same fp8 roundings (only accumulation order, the interpreter's fp8
# cast rounding and the final output cast differ).
TOLERANCE: dict[torch.dtype, float] = {
    torch.float32: 1e-5,
    torch.float16: 2e-3,
    torch.bfloat16: 1e-2,
    FP8: 6e-2,
}
# fused MoE output (bf16/fp16/fp32) against the float64 reference: a few activations land on the
# other fp8 neighbour when the accumulation order differs (seen: ~3e-3 with bf16 output).
MOE_TOLERANCE: dict[torch.dtype, float] = {
    torch.float32: 5e-3,
    torch.float16: 5e-3,
    torch.bfloat16: 1e-2,
}


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64; NaN anywhere in `out` gives inf (never passes)."""
    out64, ref64 = out.double(), ref.double()
    if not torch.isfinite(out64).all():
        return float("inf")
    return float((out64 - ref64).norm() / ref64.norm().clamp_min(1e-30))


def quantize_fp8(x: torch.Tensor, scale: torch.Tensor | float) -> torch.Tensor:
    """`clamp(x / scale, ±448)` rounded to float8_e4m3fn (round to nearest even), as float64."""
    q = (x.double() / torch.as_tensor(scale, dtype=torch.float64)).clamp(-FP8_MAX, FP8_MAX)
    return q.to(FP8).double()


def dynamic_scale(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Per-row dynamic scale amax/448 along `dim` (kept), at least MIN_SCALE, float64."""
    return (x.double().abs().amax(dim=dim, keepdim=True) / FP8_MAX).clamp_min(MIN_SCALE)


def _quant_rows(a: torch.Tensor, static: torch.Tensor | None, group: int | None) -> torch.Tensor:
    """Fake-quantise activation rows (T, K): returns the dequantised float64 values the GEMM sees."""
    a = a.double()
    if static is not None:
        s = static.double().reshape(())
        return quantize_fp8(a, s) * s
    if group is None:
        s = dynamic_scale(a).float().double()  # the kernel keeps scales in float32
        return quantize_fp8(a, s) * s
    t, k = a.shape
    pad = (-k) % group
    ap = torch.nn.functional.pad(a, (0, pad)).reshape(t, -1, group)
    s = dynamic_scale(ap).float().double()
    return (quantize_fp8(ap, s) * s).reshape(t, -1)[:, :k]


def dequant_weight(w: torch.Tensor, scale: torch.Tensor, block: tuple[int, int] | None) -> torch.Tensor:
    """Real-valued expert weights (E, N, K) float64 from fp8 weights and their scales."""
    w64 = w.double()
    e, n, k = w.shape
    s = scale.double()
    if block is not None:
        bn, bk = block
        s = s.repeat_interleave(bn, dim=1)[:, :n].repeat_interleave(bk, dim=2)[:, :, :k]
        return w64 * s
    if s.numel() == e:  # per-tensor
        return w64 * s.reshape(e, 1, 1)
    return w64 * s.reshape(e, n, 1)


def fused_moe_reference(
    hidden: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    *,
    w13_scale: torch.Tensor,
    w2_scale: torch.Tensor,
    a13_scale: torch.Tensor | None = None,
    a2_scale: torch.Tensor | None = None,
    block_shape: tuple[int, int] | None = None,
    activation: str = "silu",
) -> torch.Tensor:
    """float64 fp8_w8a8 MoE: out[t] = Σ_k w[t,k] · W2[e] · quant(silu(G[e]·quant(x)) ⊙ U[e]·quant(x)).

    hidden (T, H); w13 (E, 2I, H) fp8, rows [0, I) gate, [I, 2I) up; w2 (E, H, I) fp8;
    topk_weights (T, k) float; topk_ids (T, k) int. Returns (T, H) float64.
    activation "relu2": non-gated, w13 (E, I, H) and act = relu(W1·x)².
    """
    group = block_shape[1] if block_shape is not None else None
    inter_size = w2.shape[2]
    x = _quant_rows(hidden, a13_scale, group)
    out = torch.zeros(hidden.shape[0], hidden.shape[1], dtype=torch.float64, device=hidden.device)
    # expert by expert, dequantising only the experts in use (real shapes have GBs of weights)
    for e in torch.unique(topk_ids).tolist():
        tok, slot = (topk_ids == e).nonzero(as_tuple=True)
        w13r = dequant_weight(w13[e : e + 1], w13_scale[e : e + 1], block_shape)[0]
        w2r = dequant_weight(w2[e : e + 1], w2_scale[e : e + 1], block_shape)[0]
        gu = x[tok] @ w13r.T
        if activation == "silu":
            act = torch.nn.functional.silu(gu[:, :inter_size]) * gu[:, inter_size:]
        else:
            act = torch.relu(gu) ** 2
        act_q = _quant_rows(act.float(), a2_scale, group)
        out.index_add_(0, tok, topk_weights[tok, slot].double()[:, None] * (act_q @ w2r.T))
    return out


def rope_reference(
    x: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor, *, is_neox: bool
) -> torch.Tensor:
    """Rotary embedding in float64. x (T, heads, D); cos_sin_cache (max_pos, rot) = [cos | sin];
    only the first `rot` channels of each head rotate, the rest pass through."""
    x64 = x.double()
    rot = cos_sin_cache.shape[1]
    cs = cos_sin_cache.double()[positions.long()]  # (T, rot)
    cos, sin = cs[:, None, : rot // 2], cs[:, None, rot // 2 :]
    xr, rest = x64[..., :rot], x64[..., rot:]
    if is_neox:
        x1, x2 = xr[..., : rot // 2], xr[..., rot // 2 :]
        y = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
    else:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        y = torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).flatten(-2)
    return torch.cat([y, rest], dim=-1)


def rope_fp8_reference(
    x: torch.Tensor,
    positions: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    *,
    is_neox: bool,
    scale: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE then fp8 quantisation. Static `scale` (1,) or dynamic per token (amax over all heads).

    Returns (dequantised float64 values (T, heads, D), scales (T,) float64)."""
    y = rope_reference(x, positions, cos_sin_cache, is_neox=is_neox)
    y = y.float().double()  # the kernel rotates and quantises in float32
    t = y.shape[0]
    if scale is not None:
        s = scale.double().reshape(()).expand(t)
    else:
        s = dynamic_scale(y.reshape(t, -1)).reshape(t).float().double()
    q = quantize_fp8(y, s.reshape(t, 1, 1))
    return q * s.reshape(t, 1, 1), s
