"""One K step of GEMM1's block-dynamic path, in isolation, on the GPU: which part disagrees with PyTorch?

diag_block_dynamic (2026-11-30, benchmarks/results/kernels/logs/2026-11-30b/) found the error in GEMM1 only when x is
quantised per (token, 128-group) on the fly; static x, dynamic act, and per-tensor dynamic x all pass. This kernel
runs exactly that step — load a (16, 128) tile of x (bf16 or fp32), amax/448 per row, x / scale, clamp, cast to
fp8, transpose, dot with a (64, 128) fp8 weight tile — and writes the scales, the fp8 codes and the dot, so each
can be compared bit for bit (codes) or against an exact float64 product (dot).

    PYTHONPATH=$PWD python3 -m benchmarks.device.diag_quant_step
"""

from __future__ import annotations

import itertools

import torch
import triton
import triton.language as tl

from ops.fp8_quant import FP8_MAX, MIN_SCALE, dynamic_scale, quantize
from ops.reference import quantize_fp8


@triton.jit
def quant_step_kernel(
    x_ptr, w_ptr, s_ptr, q_ptr, d_ptr, ROWS: tl.constexpr, N: tl.constexpr, K: tl.constexpr, EXACT: tl.constexpr
):
    rows = tl.arange(0, ROWS)
    ks = tl.arange(0, K)
    ns = tl.arange(0, N)
    a = tl.load(x_ptr + rows[:, None] * K + ks[None, :]).to(tl.float32)
    if EXACT:  # what the kernels do since 2026-11-30 (ops/fp8_quant.py)
        a_s = dynamic_scale(tl.max(tl.abs(a), axis=1))
        a_q8 = quantize(a, a_s[:, None])
    else:  # what they did before: Triton's `/`, approximate on the GPU
        a_s = tl.maximum(tl.max(tl.abs(a), axis=1) / FP8_MAX, MIN_SCALE)
        a_q8 = tl.clamp(a / a_s[:, None], -FP8_MAX, FP8_MAX).to(tl.float8e4nv)
    d = tl.dot(tl.load(w_ptr + ns[:, None] * K + ks[None, :]), tl.trans(a_q8))
    tl.store(s_ptr + rows, a_s)
    tl.store(q_ptr + rows[:, None] * K + ks[None, :], a_q8)
    tl.store(d_ptr + ns[:, None] * ROWS + rows[None, :], d)


def main() -> int:
    torch.manual_seed(0)
    dev = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: TRITON_INTERPRET=1, to check the script itself
    rows, n, k = 16, 64, 128
    print(f"division  x dtype trial  scales≠  codes≠ (of {rows * k})  dot rel err  dot max |err|/|d|max")
    for exact, dtype, trial in itertools.product((False, True), (torch.bfloat16, torch.float32), range(4)):
        x = torch.randn(rows, k, device=dev).to(dtype)
        w = (torch.randn(n, k, device=dev) * 0.5).to(torch.float8_e4m3fn)
        s = torch.empty(rows, device=dev)
        q = torch.empty(rows, k, device=dev, dtype=torch.float8_e4m3fn)
        d = torch.empty(n, rows, device=dev)
        quant_step_kernel[(1,)](x, w, s, q, d, ROWS=rows, N=n, K=k, EXACT=exact)
        ref_s = (x.double().abs().amax(dim=1) / 448.0).clamp_min(1e-12).float()
        ref_q = quantize_fp8(x, ref_s.double()[:, None]).to(torch.float8_e4m3fn)
        wrong = q.view(torch.uint8) != ref_q.view(torch.uint8)
        dot_ref = w.double() @ q.double().T  # from the kernel's own codes: measures the dot alone
        err = float((d.double() - dot_ref).norm() / dot_ref.norm())
        worst = float((d.double() - dot_ref).abs().max() / dot_ref.abs().max())
        name = str(dtype).split(".")[-1]
        print(f"{'ours' if exact else '/':>8} {name:>8} {trial:>5}  {int((s != ref_s).sum()):>7}  "
              f"{int(wrong.sum()):>6}  {err:11.2e}  {worst:.2e}")  # fmt: skip
        for r, c in wrong.nonzero()[:4].tolist():
            print(f"      x={float(x[r, c]):.6g} x/s={float(x[r, c].double() / ref_s[r].double()):.6g} "
                  f"kernel={float(q[r, c].float())} torch={float(ref_q[r, c].float())}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
