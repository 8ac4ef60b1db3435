"""FP8 e4m3 quantisation steps shared by our Triton kernels, rounded exactly like the PyTorch reference.

Why not a plain `/`: on the GPU Triton compiles fp32 `/` to an approximate division (≤ 2 ulp), so
`amax / 448` and `x / scale` can land one ulp off. With a dynamic scale that matters more than it looks: for
bf16 inputs, x / (amax / 448) is often an exact tie between two fp8 neighbours (e.g. 184 between 176 and 192),
and one ulp below the tie rounds the other way. Seen on the H200 (2026-11-30, a one-K-step diagnostic,
docs/results/our-kernel.md): 8-12 of 16 per-row scales and up to 7 of 2048 fp8 codes per tile differed from
PyTorch's, enough for the DeepSeek-V3 block-dynamic cases to miss their tolerance (rel err 0.013-0.016
against 0.01). The CPU interpreter divides exactly, which is why only the GPU saw it. Correctly rounded
division (`tl.div_rn`) is a subroutine call on the GPU, too slow per element, hence `_divide`'s correction step.
"""

from __future__ import annotations

import triton
import triton.language as tl

FP8_MAX = tl.constexpr(448.0)
INV_FP8_MAX = tl.constexpr(1.0 / 448.0)  # rounded to float32 where it meets a float32 tensor: RN(1/448)
# Smallest dynamic scale: an all-zero row must not divide by zero (the reference uses the same bound).
MIN_SCALE = tl.constexpr(1e-12)


@triton.jit
def _divide(x, d, inv):
    """x / d correctly rounded, from an approximation inv ≈ 1/d (≤ 2 ulp off): Markstein's correction step
    q = q0 + (x − q0·d)·inv with q0 = x·inv, both in fused multiply-adds (the residual x − q0·d is exact)."""
    q0 = x * inv
    return tl.fma(tl.fma(-q0, d, x), inv, q0)


@triton.jit
def _refine(d, inv):
    """One Newton step for 1/d from an approximation inv (≤ 2 ulp off): inv + inv·(1 − d·inv), both in fused
    multiply-adds. Lands on RN(1/d) except for three significands just below a power of two (0x7FFFFF from any
    inexact start, 0x7FFFFD from 1-2 ulp high, 0x7FFFFB from 2 ulp high: 1 ulp low; exact rational emulation, review
    of 2026-12-01), which a bf16 amax / 448 never produces."""
    return tl.fma(inv, tl.fma(-d, inv, d * 0.0 + 1.0), inv)


@triton.jit
def _reciprocal(d):
    """1/d correctly rounded (but for _refine's three significands), from the GPU's approximate 1.0 / d."""
    return _refine(d, 1.0 / d)


@triton.jit
def dynamic_scale(amax):
    """amax / 448, correctly rounded, at least MIN_SCALE (float32, any shape)."""
    return tl.maximum(_divide(amax, amax * 0.0 + FP8_MAX, amax * 0.0 + INV_FP8_MAX), MIN_SCALE)


@triton.jit
def quantize(x, scale):
    """clamp(x / scale, ±448) rounded to nearest even float8_e4m3fn; `scale` broadcasts against float32 `x`.

    x / scale is correctly rounded without a division per element: `1.0 / scale` once per scale (approximate on
    the GPU, ≤ 2 ulp), then `_divide`'s correction. A correctly rounded division per element (tl.div_rn, a
    subroutine call on the GPU) made the kernels 2-3× slower on the H200 (2026-11-30); a div_rn per row and K
    step still cost the block-dynamic path 20-30%. Checked against x / scale in float64 on 25.6 M bf16 values
    with per-row amax/448 scales and the reciprocal pushed ±2 ulp off (tests/ops/test_fp8_quant.py: 0
    differences; x·inv alone: ~12,600 different fp8 codes) and on the GPU (0 scale and 0 code differences, 2026-12-01).
    """
    # Known limit (review, 2026-11-30): the correction is proven exact only for a correctly rounded reciprocal;
    # fp32 x (GEMM2's activation, RoPE) with the GPU's approximate 1/scale could miss a tie with probability
    # ~2^-38 per element (x = 1.2578126, scale = 0.0068359384: 176 instead of PyTorch's 192). So the reciprocal is
    # refined first (one Newton step in fused multiply-adds, `_refine`; per scale and K step, on BLOCK_M values): from
    # ≤ 2 ulp off it lands on RN(1/scale) (tests/ops/test_fp8_quant.py runs `_refine` itself). Also: a row holding ±inf
    # gets scale MIN_SCALE (NaN from the correction, dropped by tl.maximum) and a static scale so small that
    # x / scale overflows fp32 gives NaN instead of ±448.
    s_b = tl.broadcast_to(scale, x.shape)
    inv_b = tl.broadcast_to(_reciprocal(scale), x.shape)
    return tl.clamp(_divide(x, s_b, inv_b), -FP8_MAX, FP8_MAX).to(tl.float8e4nv)
