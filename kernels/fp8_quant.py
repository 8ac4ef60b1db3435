"""FP8 e4m3 quantisation steps shared by our Triton kernels, rounded exactly like the PyTorch reference.

Why `tl.div_rn` and not `/`: on the GPU Triton compiles fp32 `/` to an approximate division (≤ 2 ulp), so
`amax / 448` and `x / scale` can land one ulp off. With a dynamic scale that matters more than it looks: for
bf16 inputs, x / (amax / 448) is often an exact tie between two fp8 neighbours (e.g. 184 between 176 and 192),
and one ulp below the tie rounds the other way. Seen on the H200 (2026-11-30,
kernels/device/diag_quant_step.py): 8-12 of 16 per-row scales and up to 7 of 2048 fp8 codes per tile differed
from PyTorch's, enough for the DeepSeek-V3 block-dynamic cases to miss their tolerance (rel err 0.013-0.016
against 0.01). The CPU interpreter divides exactly, which is why only the GPU saw it. Correctly rounded
division costs a few extra instructions per element on data already in registers.
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
    """clamp(x / scale, ±448) rounded to nearest even float8_e4m3fn; `scale` broadcasts against float32 `x`."""
    q = tl.div_rn(x, tl.broadcast_to(scale, x.shape))
    return tl.clamp(q, -FP8_MAX, FP8_MAX).to(tl.float8e4nv)
