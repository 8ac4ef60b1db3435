"""Triton kernels of our FP8 fused MoE for decode (host code: ops/fused_moe_fp8.py).

Data flow (P = T·k token-slot pairs, I = expert width, H = hidden size):

    x (T, H) ─ GEMM1: quantise x to fp8 (prologue), W13[e] · xᵀ for gate AND up in one K loop,
       split over K; the LAST split program of each (row, n-tile) sums the S partials, applies
       SiLU(gate)·up or relu² and writes ─▶ act (P, I) fp32  [S = 1: written straight from registers]
    act ─ GEMM2: quantise act rows (prologue), W2[e] · actᵀ, weight by the routing weight ─▶
       PAIR mode: grid (P, H/BLOCK_N, S2); each program writes its weighted row slice to scratch and the
                  LAST of the k·S2 programs of a (token, n-tile) sums them into out (T, H)  [2 launches]
       SCAN mode: weighted per-pair rows (P, H) fp32 ─ moe_sum_kernel ─▶ out  [3 launches]

"Last program finishes the tile" (split-K fix-up): every contributing program stores its slice, then
does one acq_rel atomic add on an int32 counter of its output tile; the program that sees count-1
arrivals before it reduces the slices (read once, from L2) and resets the counter to 0. The counters
therefore are zero again after every launch: one zeroed buffer per device (cached by the host code)
serves every call, including CUDA-graph replays, with no memset launch. Why not reduce in GEMM2's
prologue (the previous design): every GEMM2 program re-read all S partial rows and recomputed SiLU,
~31 MB of L2 traffic at M = 1 on Qwen3-30B-A3B, more than W2's 12.6 MB of weights.

Programmatic dependent launch (PDL, constexpr PDL; GPU only): GEMM2 (and SCAN mode's sum) is launched with
`launch_pdl`, and its predecessor signals `gdc_launch_dependents` as soon as each of its programs starts, so
GEMM2's programs are resident while GEMM1 still streams W13. Before `gdc_wait` (which returns once GEMM1 has
finished and its writes are visible) a PAIR-mode GEMM2 program only reads the routing (written before GEMM1)
and issues L2 prefetches of its own W2 slice, so at decode the launch gap and the start of W2's stream overlap
GEMM1's tail instead of following it. Nothing GEMM1 writes is read before the wait.
GEMM1 itself may be launched the same way behind whatever precedes it, the router GEMM or the top-k kernel
(constexpr WAIT_PREV, issue 33 step 3): its programs then start during their predecessor's tail and wait
(`gdc_wait`) before their first load and before letting GEMM2 launch, so only launch latency is saved.

Every GEMM is "swap-AB": the weight tile (BLOCK_N rows of the expert, BLOCK_K) is the left operand
and the few token rows (BLOCK_M = 16, mostly masked at M = 1) the right one, so the accumulator is
(BLOCK_N, BLOCK_M) and a BLOCK_N ≥ 64 tile fits Hopper's 64-row wgmma.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from ops.fp8_quant import dynamic_scale, quantize
from ops.moe_routing import expert_pair_list, route_slot

# Weight scale layouts (constexpr W_SCALE)
W_SCALE_TENSOR = 0  # (E,)
W_SCALE_CHANNEL = 1  # (E, N)
W_SCALE_BLOCK = 2  # (E, ceil(N/GROUP), ceil(K/GROUP)); activations then use per (row, K-group) scales


@triton.jit
def _row_scales(
    a_ptr, rows, rmask, row0, stride_am, K, a_scale_ptr, A_STATIC: tl.constexpr, W_SCALE: tl.constexpr,
    ONE_ROW: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, AMAX_BLOCK: tl.constexpr,
):  # fmt: skip
    """(BLOCK_M,) float32 activation scales: static, or dynamic amax/448 over the whole K of each row
    (not only this program's K split, so all splits agree). Block scales: placeholder, set per K group.

    ONE_ROW (PAIR mode, one valid row `row0`): a 1-D pass of AMAX_BLOCK-wide loads, 1-2 iterations at
    decode sizes, instead of K/BLOCK_K dependent (BLOCK_M, BLOCK_K) tile loads."""
    if A_STATIC:
        a_s = tl.zeros((BLOCK_M,), tl.float32) + tl.load(a_scale_ptr)
    elif W_SCALE != 2:
        if ONE_ROW:
            amax = tl.zeros((AMAX_BLOCK,), tl.float32)
            base = a_ptr + row0.to(tl.int64) * stride_am
            for k0 in range(0, K, AMAX_BLOCK):
                offs = k0 + tl.arange(0, AMAX_BLOCK)
                amax = tl.maximum(amax, tl.abs(tl.load(base + offs, mask=offs < K, other=0.0).to(tl.float32)))
            a_s = tl.zeros((BLOCK_M,), tl.float32) + dynamic_scale(tl.max(amax, axis=0))
        else:
            amax = tl.zeros((BLOCK_M,), tl.float32)
            for k0 in range(0, K, BLOCK_K):
                offs_k = k0 + tl.arange(0, BLOCK_K)
                p = a_ptr + rows[:, None].to(tl.int64) * stride_am + offs_k[None, :]
                a = tl.load(p, mask=rmask[:, None] & (offs_k[None, :] < K), other=0.0).to(tl.float32)
                amax = tl.maximum(amax, tl.max(tl.abs(a), axis=1))
            a_s = dynamic_scale(amax)
    else:
        a_s = tl.zeros((BLOCK_M,), tl.float32)
    return a_s


@triton.jit
def _expert_gemm(
    a_ptr,  # (rows, K) activations, 16/32-bit: x (GEMM1) or act (GEMM2)
    rows,  # (BLOCK_M,) int32 row ids into a_ptr
    rmask,  # (BLOCK_M,) bool
    stride_am,
    K,
    a_s,  # (BLOCK_M,) float32 from _row_scales
    w_ptr,  # expert's (N, K) fp8 e4m3 matrix (already offset by the expert)
    offs_wn,  # (BLOCK_N,) rows of that matrix (gate rows when DUAL)
    wn_mask,
    up_off,  # DUAL: the up rows are offs_wn + up_off
    stride_wn,
    ws_ptr,  # expert's weight scales (already offset by the expert), float32
    stride_sn,
    stride_sk,
    k_begin,
    k_end,
    W_SCALE: tl.constexpr,
    A_STATIC: tl.constexpr,
    GROUP: tl.constexpr,
    DUAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """Two (BLOCK_N, BLOCK_M) float32 = dequant(W[rows, k_begin:k_end]) · dequant(quant(A[rows]))ᵀ for
    the gate rows and (DUAL) the up rows, sharing one activation load + quantisation per K step."""
    acc = tl.zeros((BLOCK_N, BLOCK_M), tl.float32)
    acc_u = tl.zeros((BLOCK_N, BLOCK_M), tl.float32)
    w_rows = w_ptr + offs_wn[:, None].to(tl.int64) * stride_wn
    for k0 in range(k_begin, k_end, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        kmask = offs_k[None, :] < K
        a_p = a_ptr + rows[:, None].to(tl.int64) * stride_am + offs_k[None, :]
        a = tl.load(a_p, mask=rmask[:, None] & kmask, other=0.0).to(tl.float32)
        if W_SCALE == 2 and not A_STATIC:
            a_s = dynamic_scale(tl.max(tl.abs(a), axis=1))
        a_q = tl.trans(quantize(a, a_s[:, None]))
        wm = wn_mask[:, None] & kmask
        d = tl.dot(tl.load(w_rows + offs_k[None, :], mask=wm, other=0.0), a_q)
        if DUAL:
            d_u = tl.dot(tl.load(w_rows + up_off * stride_wn + offs_k[None, :], mask=wm, other=0.0), a_q)
        if W_SCALE == 2:
            ws = tl.load(ws_ptr + (offs_wn // GROUP) * stride_sn + (k0 // GROUP) * stride_sk, mask=wn_mask, other=0.0)
            acc += d * ws[:, None] * a_s[None, :]
            if DUAL:
                wsu = tl.load(
                    ws_ptr + ((offs_wn + up_off) // GROUP) * stride_sn + (k0 // GROUP) * stride_sk,
                    mask=wn_mask,
                    other=0.0,
                )
                acc_u += d_u * wsu[:, None] * a_s[None, :]
        else:
            acc += d
            if DUAL:
                acc_u += d_u
    if W_SCALE == 0:
        ws0 = tl.load(ws_ptr)
        acc = acc * ws0 * a_s[None, :]
        acc_u = acc_u * ws0 * a_s[None, :]
    elif W_SCALE == 1:
        ws = tl.load(ws_ptr + offs_wn * stride_sn, mask=wn_mask, other=0.0)
        acc = acc * ws[:, None] * a_s[None, :]
        if DUAL:
            wsu = tl.load(ws_ptr + (offs_wn + up_off) * stride_sn, mask=wn_mask, other=0.0)
            acc_u = acc_u * wsu[:, None] * a_s[None, :]
    return acc, acc_u


@triton.jit
def _prefetch_l2(ptrs):
    """Fire-and-forget prefetch of the lines at `ptrs` into L2 (PTX `prefetch`; no register result is used)."""
    tl.inline_asm_elementwise(
        "mov.u32 $0, 0; prefetch.global.L2 [$1];", "=r,l", [ptrs], dtype=tl.int32, is_pure=False, pack=1
    )


@triton.jit
def _activation(g, u, GATED: tl.constexpr):
    if GATED:
        return g / (1.0 + tl.exp(-g)) * u
    else:
        r = tl.maximum(g, 0.0)
        return r * r


@triton.jit
def _arrive(counter_ptr, arrivals: tl.constexpr):
    """True in the program that arrives last at this counter (of `arrivals`), which also resets it.

    The barrier orders every thread's stores before the (one-thread) release; the atomic's result is
    broadcast through shared memory behind a barrier, so every thread's later loads follow the acquire."""
    tl.debug_barrier()
    prev = tl.atomic_add(counter_ptr, 1, sem="acq_rel")
    last = prev == arrivals - 1
    if last:
        tl.atomic_xchg(counter_ptr, 0)  # zero again for the next launch / graph replay
    return last


@triton.jit
def _pair_block(list_ptr, pid_r, num_pairs, n_rows, c, idx, PAIR_MODE: tl.constexpr):
    """(row mask, pair ids) of rows [c, c + BLOCK_M) of program row `pid_r`: its one pair (PAIR mode) or its
    expert's pair list (SCAN mode)."""
    if PAIR_MODE:
        rmask = idx < 1
        pairs = tl.where(rmask, pid_r, 0)
    else:
        rmask = c + idx < n_rows
        pairs = tl.load(list_ptr + pid_r * num_pairs + c + idx, mask=rmask, other=0)
    return rmask, pairs


@triton.jit
def moe_gemm1_kernel(
    x_ptr,  # (T, H) bf16/fp16/fp32 hidden states
    w_ptr,  # (E, N1, H) float8_e4m3fn; GATED: N1 = 2I, rows [0, I) gate, [I, 2I) up; else N1 = I
    ws_ptr,  # w13 scales, float32: (E,) | (E, N1) | (E, ceil(N1/G), ceil(H/G))
    a_scale_ptr,  # (1,) float32 static scale of x (ignored when dynamic)
    ids_ptr,  # (P,) int32 expert of each pair, P = T·k, pair p = (token p // k, slot p % k); < 0: none (padding)
    route_w_ptr,  # ROUTE: (P,) float32 out, each pair's routing weight (ids_ptr is then an output too)
    logits_ptr,  # ROUTE: (T, E) router logits; bias_ptr (E,) float32 (HAS_BIAS); pad_ptr (T,) (HAS_PAD)
    bias_ptr,
    pad_ptr,
    list_ptr,  # (E, P) int32 scratch: each expert's pair list (SCAN mode)
    count_ptr,  # (E,) int32 scratch: each expert's pair count (SCAN mode)
    part_ptr,  # (SPLIT, P, N1) float32 scratch: gate|up partial sums, one slab per K split (SPLIT > 1)
    counter_ptr,  # (rows, n-tiles) int32, zero on entry and on exit (SPLIT > 1)
    act_ptr,  # (P, I) float32 out: SiLU(gate)·up or relu²
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
    num_experts,
    stride_lt,
    route_scale,
    TOPK: tl.constexpr,
    W_SCALE: tl.constexpr,
    A_STATIC: tl.constexpr,
    GROUP: tl.constexpr,
    PAIR_MODE: tl.constexpr,
    ROUTE: tl.constexpr,  # PAIR mode: route from the logits (moe_routing.route_slot) instead of reading ids
    SCORING: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    RENORM: tl.constexpr,
    HAS_PAD: tl.constexpr,
    BLOCK_E: tl.constexpr,
    RANK_CHUNK: tl.constexpr,
    GATED: tl.constexpr,
    SPLIT: tl.constexpr,
    SCAN_BLOCK: tl.constexpr,
    AMAX_BLOCK: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PDL: tl.constexpr,
    WAIT_PREV: tl.constexpr,  # launched under PDL behind its predecessor (MoEKernelConfig.pdl_gemm1; GPU only)
):
    """Grid (P or E, ceil(I / BLOCK_N), SPLIT): program (row, n, s) computes gate and up rows
    [n·BLOCK_N, +BLOCK_N) over K range s for one pair (PAIR mode) or all pairs of expert `row`."""
    if WAIT_PREV:
        # before anything else, the dependents' trigger included: GEMM2 reads the routing (the predecessor's output)
        # before its own gdc_wait, so it must not launch until the predecessor has finished
        gdc_wait()
    if PDL:
        gdc_launch_dependents()  # GEMM2 may launch once every GEMM1 program has started
    pid_r = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_k = tl.program_id(2)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < inter
    if PAIR_MODE:
        if ROUTE:  # this pair's expert from its token's logits; the first program of the pair records it for callers
            pair_id, route_w = route_slot(
                logits_ptr, bias_ptr, pad_ptr, pid_r // TOPK, pid_r % TOPK, num_experts, stride_lt, route_scale,
                TOPK, SCORING, HAS_BIAS, RENORM, HAS_PAD, BLOCK_E, RANK_CHUNK,
            )  # fmt: skip
            first = (pid_n == 0) & (pid_k == 0)
            tl.store(ids_ptr + pid_r, pair_id, mask=first)
            tl.store(route_w_ptr + pid_r, route_w, mask=first)
        else:
            pair_id = tl.load(ids_ptr + pid_r)
        expert = tl.maximum(pair_id, 0)  # id < 0: no expert (padding); below, no K step runs for it
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
    if PAIR_MODE:
        k_end = tl.where(pair_id < 0, k_begin, k_end)  # a pair without an expert reads no weights: its act is 0
    n1 = 2 * inter if GATED else inter
    idx = tl.arange(0, BLOCK_M)
    for c in range(0, n_rows, BLOCK_M):
        rmask, pairs = _pair_block(list_ptr, pid_r, num_pairs, n_rows, c, idx, PAIR_MODE)
        tokens = pairs // TOPK
        a_s = _row_scales(
            x_ptr, tokens, rmask, pid_r // TOPK, stride_xt, H, a_scale_ptr, A_STATIC, W_SCALE, PAIR_MODE,
            BLOCK_M, BLOCK_K, AMAX_BLOCK,
        )  # fmt: skip
        gate, up = _expert_gemm(
            x_ptr, tokens, rmask, stride_xt, H, a_s, w_e, offs_n, n_mask, inter, stride_wn, ws_e, stride_sn,
            stride_sk, k_begin, k_end, W_SCALE, A_STATIC, GROUP, GATED, BLOCK_M, BLOCK_N, BLOCK_K,
        )  # fmt: skip
        m = n_mask[:, None] & rmask[None, :]
        if SPLIT == 1:
            tl.store(act_ptr + pairs[None, :].to(tl.int64) * inter + offs_n[:, None], _activation(gate, up, GATED), m)
        else:
            out = part_ptr + pid_k.to(tl.int64) * num_pairs * n1 + pairs[None, :].to(tl.int64) * n1 + offs_n[:, None]
            tl.store(out, gate, mask=m)
            if GATED:
                tl.store(out + inter, up, mask=m)
    if SPLIT > 1:  # noqa: SIM102 -- compile-time branch; `constexpr and runtime` would not fold
        if _arrive(counter_ptr + pid_r * tl.num_programs(1) + pid_n, SPLIT):
            for c in range(0, n_rows, BLOCK_M):
                rmask, pairs = _pair_block(list_ptr, pid_r, num_pairs, n_rows, c, idx, PAIR_MODE)
                m = n_mask[:, None] & rmask[None, :]
                src = part_ptr + pairs[None, :].to(tl.int64) * n1 + offs_n[:, None]
                g = tl.zeros((BLOCK_N, BLOCK_M), tl.float32)
                u = tl.zeros((BLOCK_N, BLOCK_M), tl.float32)
                for s in tl.static_range(SPLIT):
                    g += tl.load(src + s * num_pairs * n1, mask=m, other=0.0, cache_modifier=".cg")
                    if GATED:
                        u += tl.load(src + s * num_pairs * n1 + inter, mask=m, other=0.0, cache_modifier=".cg")
                dst = act_ptr + pairs[None, :].to(tl.int64) * inter + offs_n[:, None]
                tl.store(dst, _activation(g, u, GATED), mask=m)


@triton.jit
def moe_gemm2_kernel(
    act_ptr,  # (P, I) float32 from moe_gemm1_kernel
    w_ptr,  # (E, H, I) float8_e4m3fn
    ws_ptr,  # w2 scales, float32: (E,) | (E, H) | (E, ceil(H/G), ceil(I/G))
    a_scale_ptr,  # (1,) float32 static scale of the activation (ignored when dynamic)
    ids_ptr,  # (P,) int32
    topk_w_ptr,  # (P,) float32 routing weight of each pair
    logits_ptr,  # ROUTE: as moe_gemm1_kernel's (each pair routed again here: same inputs, same answer)
    bias_ptr,
    pad_ptr,
    list_ptr,  # (E, P) int32 pair lists written by GEMM1 (SCAN mode)
    count_ptr,  # (E,) int32 pair counts written by GEMM1 (SCAN mode)
    scratch_ptr,  # PAIR, TOPK·SPLIT > 1: (SPLIT, P, H) float32 weighted slices; SCAN: (P, H) fp32 rows
    counter_ptr,  # PAIR, TOPK·SPLIT > 1: (T, n-tiles) int32, zero on entry and exit
    out_ptr,  # (T, H) hidden dtype
    num_pairs,
    H,
    inter,
    k_per_split,
    stride_we,
    stride_wn,
    stride_se,
    stride_sn,
    stride_sk,
    stride_ot,
    num_experts,
    stride_lt,
    route_scale,
    TOPK: tl.constexpr,
    W_SCALE: tl.constexpr,
    A_STATIC: tl.constexpr,
    GROUP: tl.constexpr,
    PAIR_MODE: tl.constexpr,
    ROUTE: tl.constexpr,
    SCORING: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    RENORM: tl.constexpr,
    HAS_PAD: tl.constexpr,
    BLOCK_E: tl.constexpr,
    RANK_CHUNK: tl.constexpr,
    SPLIT: tl.constexpr,
    ATOMIC_SUM: tl.constexpr,  # PAIR mode's top-k sum by fp32 atomics into a zeroed (T, H) buffer instead of slices
    AMAX_BLOCK: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PDL: tl.constexpr,
):
    """PAIR mode: grid (P, ceil(H / BLOCK_N), SPLIT), program (p, n, s) = pair p's hidden rows
    [n·BLOCK_N, +BLOCK_N) over K range s; the last of the token's k·SPLIT programs writes out.
    SCAN mode: grid (E, ceil(H / BLOCK_N)), program (e, n) handles all pairs of expert e."""
    pid_r = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < H
    idx = tl.arange(0, BLOCK_M)
    if PAIR_MODE:
        pid_k = tl.program_id(2)
        if ROUTE:  # from the logits, which exist before GEMM1 runs: safe before the wait
            routed_id, pair_w = route_slot(
                logits_ptr, bias_ptr, pad_ptr, pid_r // TOPK, pid_r % TOPK, num_experts, stride_lt, route_scale,
                TOPK, SCORING, HAS_BIAS, RENORM, HAS_PAD, BLOCK_E, RANK_CHUNK,
            )  # fmt: skip
            pair_id = routed_id.to(tl.int64)
        else:
            pair_id = tl.load(ids_ptr + pid_r).to(tl.int64)  # routing: written before GEMM1, safe before the wait
            pair_w = tl.load(topk_w_ptr + pid_r)
        expert = tl.maximum(pair_id, 0)
        k_begin = pid_k * k_per_split
        k_end = tl.where(pair_id < 0, k_begin, tl.minimum(k_begin + k_per_split, inter))  # no expert: no weights read
        if PDL:
            w_rows = w_ptr + expert * stride_we + offs_n.to(tl.int64) * stride_wn
            for k0 in range(k_begin, k_end, BLOCK_K):
                _prefetch_l2(tl.where(n_mask, w_rows + k0, w_rows - offs_n * stride_wn))  # 1 line per row
            gdc_wait()  # GEMM1 done, `act` visible
        rmask = idx < 1
        rows = tl.where(rmask, pid_r, 0)
        a_s = _row_scales(
            act_ptr, rows, rmask, pid_r, inter, inter, a_scale_ptr, A_STATIC, W_SCALE, True, BLOCK_M, BLOCK_K,
            AMAX_BLOCK,
        )  # fmt: skip
        acc, _ = _expert_gemm(
            act_ptr, rows, rmask, inter, inter, a_s, w_ptr + expert * stride_we, offs_n, n_mask, 0, stride_wn,
            ws_ptr + expert * stride_se, stride_sn, stride_sk, k_begin, k_end,
            W_SCALE, A_STATIC, GROUP, False, BLOCK_M, BLOCK_N, BLOCK_K,
        )  # fmt: skip
        y = tl.sum(acc, axis=1) * tl.where(pair_id < 0, 0.0, pair_w)
        token = pid_r // TOPK
        dst = out_ptr + token.to(tl.int64) * stride_ot + offs_n
        if TOPK * SPLIT == 1:
            tl.store(dst, y.to(out_ptr.dtype.element_ty), mask=n_mask)
        else:
            acc_row = scratch_ptr + token.to(tl.int64) * H + offs_n  # ATOMIC_SUM: (T, H) fp32, zero on entry
            if ATOMIC_SUM:
                tl.atomic_add(acc_row, y, mask=n_mask, sem="relaxed")
            else:
                tl.store(scratch_ptr + (pid_k * num_pairs + pid_r).to(tl.int64) * H + offs_n, y, mask=n_mask)
            if _arrive(counter_ptr + token * tl.num_programs(1) + pid_n, TOPK * SPLIT):
                if ATOMIC_SUM:  # order-dependent sum (the comparison of the deterministic one: MoEKernelConfig)
                    total = tl.load(acc_row, mask=n_mask, other=0.0, cache_modifier=".cg")
                    tl.store(acc_row, tl.zeros((BLOCK_N,), tl.float32), mask=n_mask)  # zero again for the next launch
                else:
                    total = tl.zeros((BLOCK_N,), tl.float32)
                    for j in tl.static_range(TOPK):  # fixed order: deterministic sums
                        for s in tl.static_range(SPLIT):
                            src = scratch_ptr + (s * num_pairs + token * TOPK + j).to(tl.int64) * H + offs_n
                            total += tl.load(src, mask=n_mask, other=0.0, cache_modifier=".cg")
                tl.store(dst, total.to(out_ptr.dtype.element_ty), mask=n_mask)
    else:
        if PDL:
            gdc_launch_dependents()  # moe_sum_kernel may launch
            gdc_wait()  # GEMM1's pair lists, counts and `act` visible
        expert = pid_r.to(tl.int64)
        n_rows = tl.load(count_ptr + pid_r)
        for c in range(0, n_rows, BLOCK_M):
            rmask = c + idx < n_rows
            rows = tl.load(list_ptr + pid_r * num_pairs + c + idx, mask=rmask, other=0)
            a_s = _row_scales(
                act_ptr, rows, rmask, 0, inter, inter, a_scale_ptr, A_STATIC, W_SCALE, False, BLOCK_M, BLOCK_K,
                AMAX_BLOCK,
            )  # fmt: skip
            acc, _ = _expert_gemm(
                act_ptr, rows, rmask, inter, inter, a_s, w_ptr + expert * stride_we, offs_n, n_mask, 0, stride_wn,
                ws_ptr + expert * stride_se, stride_sn, stride_sk, 0, inter, W_SCALE, A_STATIC, GROUP, False,
                BLOCK_M, BLOCK_N, BLOCK_K,
            )  # fmt: skip
            wt = tl.load(topk_w_ptr + rows, mask=rmask, other=0.0)
            wt = tl.where(tl.load(ids_ptr + rows, mask=rmask, other=0) < 0, 0.0, wt)  # pairs without an expert: 0
            out = scratch_ptr + rows[None, :].to(tl.int64) * H + offs_n[:, None]
            tl.store(out, acc * wt[None, :], mask=n_mask[:, None] & rmask[None, :])


@triton.jit
def moe_sum_kernel(
    pair_ptr,  # (P, H) float32 weighted per-pair rows
    out_ptr,  # (T, H) hidden dtype
    H,
    stride_ot,
    TOPK: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PDL: tl.constexpr,
):
    """Grid (T, ceil(H / BLOCK_N)): out[t] = Σ_j pair[t·k + j] (SCAN mode only)."""
    if PDL:
        gdc_wait()  # GEMM2's rows visible
    t = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    m = offs < H
    acc = tl.zeros((BLOCK_N,), tl.float32)
    for j in range(TOPK):
        acc += tl.load(pair_ptr + (t * TOPK + j) * H + offs, mask=m, other=0.0)
    tl.store(out_ptr + t * stride_ot + offs, acc.to(out_ptr.dtype.element_ty), mask=m)
