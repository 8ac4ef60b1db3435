"""FP8 e4m3 quantisation steps shared by our Triton kernels, rounded exactly like the PyTorch reference.

Why `tl.div_rn` and not `/`: on the GPU Triton compiles fp32 `/` to an approximate division (≤ 2 ulp), so
`amax / 448` and `x / scale` can land one ulp off. With a dynamic scale that matters more than it looks: for
bf16 inputs, x / (amax / 448) is often an exact tie between two fp8 neighbours (e.g. 184 between 176 and 192),
and one ulp below the tie rounds the other way. Seen on the H200 (2026-11-30,
kernels/device/diag_quant_step.py): 8-12 of 16 per-row scales and up to 7 of 2048 fp8 codes per tile differed
from PyTorch's, enough for the DeepSeek-V3 block-dynamic cases to miss their tolerance (rel err 0.013-0.016
against 0.01). The CPU interpreter divides exactly, which is why only the GPU saw it. Correctly rounded
division per element is slow on the GPU (a subroutine call), hence `quantize`'s reciprocal + correction.
"""

from __future__ import annotations

import triton
import triton.language as tl

FP8_MAX = tl.constexpr(448.0)
# Smallest dynamic scale: an all-zero row must not divide by zero (the reference uses the same bound).
MIN_SCALE = tl.constexpr(1e-12)


@triton.jit
def dynamic_scale(amax):
    """amax / 448, correctly rounded, at least MIN_SCALE (float32, any shape)."""
    return tl.maximum(tl.div_rn(amax, tl.full(amax.shape, FP8_MAX, tl.float32)), MIN_SCALE)


@triton.jit
def quantize(x, scale):
    """clamp(x / scale, ±448) rounded to nearest even float8_e4m3fn; `scale` broadcasts against float32 `x`.

    x / scale correctly rounded without a division per element (div.rn per element made the kernels 2-3×
    slower on the H200, 2026-11-30): one correctly rounded reciprocal per scale, then Markstein's correction
    q = q0 + (x − q0·scale)·inv with q0 = x·inv, both steps fused multiply-adds (the residual is exact).
    Checked bit for bit against x / scale in float64 on 25.6 M bf16 values with per-row amax/448 scales
    (0 differences; x·inv alone: 12,616 different fp8 codes) and on the GPU (kernels/device/diag_quant_step.py).
    """
    inv = tl.div_rn(scale * 0.0 + 1.0, scale)
    s_b = tl.broadcast_to(scale, x.shape)
    inv_b = tl.broadcast_to(inv, x.shape)
    q0 = x * inv_b
    q = tl.fma(tl.fma(-q0, s_b, x), inv_b, q0)
    return tl.clamp(q, -FP8_MAX, FP8_MAX).to(tl.float8e4nv)
