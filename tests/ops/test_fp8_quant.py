"""ops/fp8_quant.py: dynamic scales and fp8 codes equal PyTorch's correctly rounded x / scale.

Two levels: the algorithm (`_divide`'s correction step) emulated in float64 with the reciprocal pushed up to
±2 ulp off, as the GPU's approximate `1.0 / scale` may be; and the Triton helpers themselves (GPU, or the CPU
interpreter), code for code against PyTorch on bf16 rows whose quotients hit fp8 ties.
"""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from ops.fp8_quant import dynamic_scale, quantize
from ops.problems import bf16_rows
from ops.reference import quantize_fp8
from tests.ops.conftest import DEVICE

FP8 = torch.float8_e4m3fn


def _codes(q: torch.Tensor) -> torch.Tensor:
    return q.clamp(-448, 448).to(FP8).view(torch.uint8)


@pytest.mark.parametrize("ulps", [-2, -1, 0, 1, 2])
def test_correction_step_is_correctly_rounded_with_an_inexact_reciprocal(ulps):
    x = bf16_rows(20000, seed=ulps + 10)
    s = (x.double().abs().amax(dim=1, keepdim=True) / 448.0).float()
    inv = ((1.0 / s.double()).float().view(torch.int32) + ulps).view(torch.float32)
    q0 = x * inv  # float32, rounded once
    residual = (x.double() - q0.double() * s.double()).float()  # exact: what the first fma computes
    q = (residual.double() * inv.double() + q0.double()).float()  # the second fma: one rounding
    exact = x.double() / s.double()
    assert int((q != exact.float()).sum()) == 0
    assert int((_codes(q) != _codes(exact)).sum()) == 0
    # the control: without the correction a plain x·inv gets hundreds of codes wrong on the same data
    assert int((_codes(q0) != _codes(exact)).sum()) > 100


@triton.jit
def _quant_rows_kernel(x_ptr, s_ptr, q_ptr, ROWS: tl.constexpr, K: tl.constexpr):
    rows = tl.arange(0, ROWS)
    ks = tl.arange(0, K)
    a = tl.load(x_ptr + rows[:, None] * K + ks[None, :]).to(tl.float32)
    s = dynamic_scale(tl.max(tl.abs(a), axis=1))
    tl.store(s_ptr + rows, s)
    tl.store(q_ptr + rows[:, None] * K + ks[None, :], quantize(a, s[:, None]))


def test_triton_helpers_match_pytorch_code_for_code():
    x = bf16_rows(64, seed=3).to(torch.bfloat16)
    x[0, :] = torch.tensor([0.5 * (i % 7 - 3) for i in range(128)])  # a row full of exact ties
    x = x.to(DEVICE)
    s = torch.empty(64, device=DEVICE)
    q = torch.empty(64, 128, device=DEVICE, dtype=FP8)
    _quant_rows_kernel[(1,)](x, s, q, ROWS=64, K=128)
    ref_s = (x.double().abs().amax(dim=1) / 448.0).clamp_min(1e-12).float()
    assert torch.equal(s, ref_s)
    ref_q = quantize_fp8(x, ref_s.double()[:, None]).to(FP8)
    assert torch.equal(q.view(torch.uint8), ref_q.view(torch.uint8))
