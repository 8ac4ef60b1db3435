"""Triton kernels of our FP8 fused MoE for decode (host code: kernels/fused_moe_fp8.py).

Data flow (P = T·k token-slot pairs, I = expert width, H = hidden size):

    x (T, H) ─ GEMM1: per row quantise x to fp8 (prologue), W13[e] · xᵀ, split over K ─▶
    partials (S, P, N1) fp32  [gate | up (N1 = 2I), or one matrix (N1 = I) for relu² models]
    ─ GEMM2: prologue sums the S partials, SiLU(gate)·up or relu², quantises to fp8; W2[e] · actᵀ ─▶
       PAIR mode: loops over the token's k slots and writes out (T, H) weighted  [2 launches]
       SCAN mode: writes weighted per-pair rows (P, H) fp32 ─ moe_sum_kernel ─▶ out  [3 launches]

Why split-K in GEMM1 and the activation in GEMM2's prologue: at M = 1 a GEMM1 that owns full rows
has only P·2I/BLOCK_N programs (32 for DeepSeek-V3 TP8 with 64-row tiles), far too few to keep
132 SMs streaming weights. Splitting K needs a reduction before SiLU; doing it in GEMM2's prologue
(the partials are small and L2-resident) costs no launch.

Every GEMM is "swap-AB": the weight tile (BLOCK_N rows of the expert, BLOCK_K) is the left operand
and the few token rows (BLOCK_M = 16, mostly masked at M = 1) the right one, so the accumulator is
(BLOCK_N, BLOCK_M) and a BLOCK_N ≥ 64 tile fits Hopper's 64-row wgmma.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.moe_routing import expert_pair_list

# Weight scale layouts (constexpr W_SCALE)
W_SCALE_TENSOR = 0  # (E,)
W_SCALE_CHANNEL = 1  # (E, N)
W_SCALE_BLOCK = 2  # (E, ceil(N/GROUP), ceil(K/GROUP)); activations then use per (row, K-group) scales

FP8_MAX = tl.constexpr(448.0)
MIN_SCALE = tl.constexpr(1e-12)


@triton.jit
def _a_tile(
    a_ptr, rows, rmask, offs_k, K, stride_am, split_stride, inter, SPLIT: tl.constexpr, ACT: tl.constexpr,
    GATED: tl.constexpr,
):  # fmt: skip
    """(BLOCK_M, BLOCK_K) float32 activation tile; masked rows/columns are 0.

    ACT=False: a_ptr is x (T, H) 16/32-bit and rows are token ids.
    ACT=True: a_ptr is the GEMM1 partials (SPLIT, P, N1) fp32 and rows are pair ids: sum the splits,
    then SiLU(gate)·up (GATED, N1 = 2I) or relu(x)² (N1 = I, Nemotron-3)."""
    m = rmask[:, None] & (offs_k[None, :] < K)
    if ACT:
        g = tl.zeros(m.shape, tl.float32)
        u = tl.zeros(m.shape, tl.float32)
        for s in tl.static_range(SPLIT):
            p = a_ptr + s * split_stride + rows[:, None].to(tl.int64) * stride_am + offs_k[None, :]
            g += tl.load(p, mask=m, other=0.0)
            if GATED:
                u += tl.load(p + inter, mask=m, other=0.0)
        if GATED:
            return g / (1.0 + tl.exp(-g)) * u
        else:
            r = tl.maximum(g, 0.0)
            return r * r
    else:
        p = a_ptr + rows[:, None].to(tl.int64) * stride_am + offs_k[None, :]
        return tl.load(p, mask=m, other=0.0).to(tl.float32)


@triton.jit
def _expert_gemm(
    a_ptr,  # see _a_tile
    rows,  # (BLOCK_M,) int32 row ids into a_ptr
    rmask,  # (BLOCK_M,) bool
    stride_am,
    K,
    split_stride,
    inter,
    w_ptr,  # expert's (N, K) fp8 e4m3 matrix (already offset by the expert)
    offs_wn,  # (BLOCK_N,) rows of that matrix
    wn_mask,
    stride_wn,
    ws_ptr,  # expert's weight scales (already offset by the expert), float32
    stride_sn,
    stride_sk,
    a_scale_ptr,  # (1,) float32 static activation scale
    k_begin,
    k_end,
    W_SCALE: tl.constexpr,
    A_STATIC: tl.constexpr,
    GROUP: tl.constexpr,
    SPLIT: tl.constexpr,
    ACT: tl.constexpr,
    GATED: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """(BLOCK_N, BLOCK_M) float32 = dequant(W[offs_wn, k_begin:k_end]) · dequant(quant(A[rows]))ᵀ."""
    if A_STATIC:
        a_s = tl.zeros((BLOCK_M,), tl.float32) + tl.load(a_scale_ptr)
    elif W_SCALE != 2:
        # dynamic per-row scale over the whole K (not only this split): all splits agree on it
        amax = tl.zeros((BLOCK_M,), tl.float32)
        for k0 in range(0, K, BLOCK_K):
            a = _a_tile(
                a_ptr, rows, rmask, k0 + tl.arange(0, BLOCK_K), K, stride_am, split_stride, inter, SPLIT, ACT, GATED
            )
            amax = tl.maximum(amax, tl.max(tl.abs(a), axis=1))
        a_s = tl.maximum(amax / FP8_MAX, MIN_SCALE)
    else:
        a_s = tl.zeros((BLOCK_M,), tl.float32)  # set per K group below
    acc = tl.zeros((BLOCK_N, BLOCK_M), tl.float32)
    for k0 in range(k_begin, k_end, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        a = _a_tile(a_ptr, rows, rmask, offs_k, K, stride_am, split_stride, inter, SPLIT, ACT, GATED)
        if W_SCALE == 2 and not A_STATIC:
            a_s = tl.maximum(tl.max(tl.abs(a), axis=1) / FP8_MAX, MIN_SCALE)
        a_q = tl.clamp(a / a_s[:, None], -FP8_MAX, FP8_MAX).to(tl.float8e4nv)
        w = tl.load(
            w_ptr + offs_wn[:, None].to(tl.int64) * stride_wn + offs_k[None, :],
            mask=wn_mask[:, None] & (offs_k[None, :] < K),
            other=0.0,
        )
        d = tl.dot(w, tl.trans(a_q))
        if W_SCALE == 2:
            ws = tl.load(ws_ptr + (offs_wn // GROUP) * stride_sn + (k0 // GROUP) * stride_sk, mask=wn_mask, other=0.0)
            acc += d * ws[:, None] * a_s[None, :]
        else:
            acc += d
    if W_SCALE == 0:
        acc = acc * tl.load(ws_ptr) * a_s[None, :]
    elif W_SCALE == 1:
        ws = tl.load(ws_ptr + offs_wn * stride_sn, mask=wn_mask, other=0.0)
        acc = acc * ws[:, None] * a_s[None, :]
    return acc


@triton.jit
def moe_gemm1_kernel(
    x_ptr,  # (T, H) bf16/fp16/fp32 hidden states
    w_ptr,  # (E, N1, H) float8_e4m3fn; GATED: N1 = 2I, rows [0, I) gate, [I, 2I) up; else N1 = I
    ws_ptr,  # w13 scales, float32: (E,) | (E, N1) | (E, ceil(N1/G), ceil(H/G))
    a_scale_ptr,  # (1,) float32 static scale of x (ignored when dynamic)
    ids_ptr,  # (P,) int32 expert of each pair, P = T·k, pair p = (token p // k, slot p % k)
    list_ptr,  # (E, P) int32 scratch: each expert's pair list (SCAN mode)
    count_ptr,  # (E,) int32 scratch: each expert's pair count (SCAN mode)
    part_ptr,  # (SPLIT, P, N1) float32 out: gate|up pre-activations, one slab per K split
    num_pairs,
    H,
    inter,
    k_per_split,
    stride_xt,
    stride_we,
    stride_wn,
    stride_se,
    stride_sn,
    stride_sk,
    TOPK: tl.constexpr,
    W_SCALE: tl.constexpr,
    A_STATIC: tl.constexpr,
    GROUP: tl.constexpr,
    PAIR_MODE: tl.constexpr,
    GATED: tl.constexpr,
    SCAN_BLOCK: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """Grid (P or E, ceil(I / BLOCK_N), SPLIT): program (row, n, s) computes gate and up rows
    [n·BLOCK_N, +BLOCK_N) over K range s for one pair (PAIR mode) or all pairs of expert `row`."""
    pid_r = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_k = tl.program_id(2)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < inter
    if PAIR_MODE:
        expert = tl.load(ids_ptr + pid_r)
        n_rows = 1
    else:
        expert = pid_r
        n_rows = expert_pair_list(
            ids_ptr, list_ptr + pid_r * num_pairs, count_ptr + pid_r, pid_r, num_pairs, SCAN_BLOCK
        )
    w_e = w_ptr + expert.to(tl.int64) * stride_we
    ws_e = ws_ptr + expert.to(tl.int64) * stride_se
    k_begin = pid_k * k_per_split
    k_end = tl.minimum(k_begin + k_per_split, H)
    n1 = 2 * inter if GATED else inter
    out_base = part_ptr + pid_k.to(tl.int64) * num_pairs * n1
    for c in range(0, n_rows, BLOCK_M):
        idx = c + tl.arange(0, BLOCK_M)
        if PAIR_MODE:
            rmask = idx < 1
            pairs = tl.where(rmask, pid_r, 0)
        else:
            rmask = idx < n_rows
            pairs = tl.load(list_ptr + pid_r * num_pairs + idx, mask=rmask, other=0)
        tokens = pairs // TOPK
        gate = _expert_gemm(
            x_ptr, tokens, rmask, stride_xt, H, 0, 0, w_e, offs_n, n_mask, stride_wn, ws_e, stride_sn, stride_sk,
            a_scale_ptr, k_begin, k_end, W_SCALE, A_STATIC, GROUP, 1, False, False, BLOCK_M, BLOCK_N, BLOCK_K,
        )  # fmt: skip
        out = out_base + pairs[None, :].to(tl.int64) * n1 + offs_n[:, None]
        m = n_mask[:, None] & rmask[None, :]
        tl.store(out, gate, mask=m)
        if GATED:
            up = _expert_gemm(
                x_ptr, tokens, rmask, stride_xt, H, 0, 0, w_e, offs_n + inter, n_mask, stride_wn, ws_e, stride_sn,
                stride_sk, a_scale_ptr, k_begin, k_end, W_SCALE, A_STATIC, GROUP, 1, False, False, BLOCK_M, BLOCK_N,
                BLOCK_K,
            )  # fmt: skip
            tl.store(out + inter, up, mask=m)


@triton.jit
def moe_gemm2_kernel(
    part_ptr,  # (SPLIT, P, N1) float32 from moe_gemm1_kernel
    w_ptr,  # (E, H, I) float8_e4m3fn
    ws_ptr,  # w2 scales, float32: (E,) | (E, H) | (E, ceil(H/G), ceil(I/G))
    a_scale_ptr,  # (1,) float32 static scale of the activation (ignored when dynamic)
    ids_ptr,  # (P,) int32
    topk_w_ptr,  # (P,) float32 routing weight of each pair
    list_ptr,  # (E, P) int32 pair lists written by GEMM1 (SCAN mode)
    count_ptr,  # (E,) int32 pair counts written by GEMM1 (SCAN mode)
    out_ptr,  # PAIR: (T, H) hidden dtype, final output; SCAN: (P, H) float32 weighted per-pair rows
    num_pairs,
    H,
    inter,
    stride_we,
    stride_wn,
    stride_se,
    stride_sn,
    stride_sk,
    stride_ot,
    TOPK: tl.constexpr,
    W_SCALE: tl.constexpr,
    A_STATIC: tl.constexpr,
    GROUP: tl.constexpr,
    SPLIT: tl.constexpr,
    PAIR_MODE: tl.constexpr,
    GATED: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """Grid (T or E, ceil(H / BLOCK_N)). PAIR mode: program (t, n) sums its k slots itself (no
    reduction launch). SCAN mode: program (e, n) handles all pairs of expert e."""
    pid_r = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < H
    n1 = 2 * inter if GATED else inter
    split_stride = num_pairs * n1
    idx = tl.arange(0, BLOCK_M)
    if PAIR_MODE:
        total = tl.zeros((BLOCK_N,), tl.float32)
        for j in range(TOPK):
            pair = pid_r * TOPK + j
            expert = tl.load(ids_ptr + pair).to(tl.int64)
            rmask = idx < 1
            rows = tl.where(rmask, pair, 0)
            acc = _expert_gemm(
                part_ptr, rows, rmask, n1, inter, split_stride, inter, w_ptr + expert * stride_we, offs_n,
                n_mask, stride_wn, ws_ptr + expert * stride_se, stride_sn, stride_sk, a_scale_ptr, 0, inter,
                W_SCALE, A_STATIC, GROUP, SPLIT, True, GATED, BLOCK_M, BLOCK_N, BLOCK_K,
            )  # fmt: skip
            total += tl.sum(acc, axis=1) * tl.load(topk_w_ptr + pair)
        tl.store(out_ptr + pid_r.to(tl.int64) * stride_ot + offs_n, total.to(out_ptr.dtype.element_ty), mask=n_mask)
    else:
        expert = pid_r.to(tl.int64)
        n_rows = tl.load(count_ptr + pid_r)
        for c in range(0, n_rows, BLOCK_M):
            rmask = c + idx < n_rows
            rows = tl.load(list_ptr + pid_r * num_pairs + c + idx, mask=rmask, other=0)
            acc = _expert_gemm(
                part_ptr, rows, rmask, n1, inter, split_stride, inter, w_ptr + expert * stride_we, offs_n,
                n_mask, stride_wn, ws_ptr + expert * stride_se, stride_sn, stride_sk, a_scale_ptr, 0, inter,
                W_SCALE, A_STATIC, GROUP, SPLIT, True, GATED, BLOCK_M, BLOCK_N, BLOCK_K,
            )  # fmt: skip
            wt = tl.load(topk_w_ptr + rows, mask=rmask, other=0.0)
            out = out_ptr + rows[None, :].to(tl.int64) * H + offs_n[:, None]
            tl.store(out, acc * wt[None, :], mask=n_mask[:, None] & rmask[None, :])


@triton.jit
def moe_sum_kernel(
    pair_ptr,  # (P, H) float32 weighted per-pair rows
    out_ptr,  # (T, H) hidden dtype
    H,
    stride_ot,
    TOPK: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """Grid (T, ceil(H / BLOCK_N)): out[t] = Σ_j pair[t·k + j] (SCAN mode only)."""
    t = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    m = offs < H
    acc = tl.zeros((BLOCK_N,), tl.float32)
    for j in range(TOPK):
        acc += tl.load(pair_ptr + (t * TOPK + j) * H + offs, mask=m, other=0.0)
    tl.store(out_ptr + t * stride_ot + offs, acc.to(out_ptr.dtype.element_ty), mask=m)
