"""Our FP8 fused MoE for decode: `fused_moe_fp8(...)`, its validation, tile heuristics and launches.

Kernels and the data flow live in ops/fused_moe_fp8_kernels.py; routing modes in
ops/moe_routing.py. Two launches at small M (PAIR mode: GEMM1 with its split-K reduction and the
activation in a "last split finishes the tile" epilogue, GEMM2 with the top-k reduction done the same
way), three at larger M (SCAN mode: GEMM1, GEMM2, sum). vLLM's Triton path uses six or seven (align,
input quant, GEMM1, SiLU·mul, quant, GEMM2, sum).

Counter buffer: both fix-ups count arrivals in int32 counters that the last program resets to 0, so
one zeroed buffer per device (`_counters`, grown on demand, never freed) serves every call and every
CUDA-graph replay without a memset. It grows outside graph capture (vLLM runs each captured size eagerly
once first; the largest M alone is not enough: PAIR mode at a smaller M can need more counters than SCAN
mode); a call that needs more while capturing gets a buffer private to that graph, zeroed by a fill node in
the graph, because a buffer allocated during capture is unwritten until the graph replays. Calls on several
streams of one device at the same time would share counters: not supported (vLLM runs a model's MoE layers on
one stream).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton

from ops import fused_moe_fp8_kernels as K
from ops.moe_routing import (
    RANK_CHUNK,
    SCORINGS,
    LogitsRouting,
    expected_distinct_experts,
    moe_route_kernel,
    use_pair_mode,
)

FP8_DTYPE = torch.float8_e4m3fn
FLOAT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
# Tokens per expert handled per dot in PAIR mode (one valid row): 16 is the smallest row count of a Triton
# fp8 dot. SCAN mode picks 16 or 32 from the expected pairs per expert (`scan_block_m`).
BLOCK_M = 16
# SCAN mode: a program walks its expert's pairs in chunks of block_m rows and re-streams its weight tile for
# every chunk (see `scan_block_m` for what the H200 showed).
MAX_SCAN_BLOCK_M = 32
# Pairs scanned per step when a SCAN-mode program collects its expert's pairs (≤ 2048 pairs at M=256).
SCAN_BLOCK = 1024
# Width of the 1-D loads of the dynamic-scale amax pass in PAIR mode (one row: 8 floats per thread).
AMAX_BLOCK = 1024
# Programs we want per launch per SM: enough loads in flight to stream weights at full bandwidth.
PROGRAMS_PER_SM = 3
ACTIVATIONS = {"silu": True, "relu2": False}  # name → gated
# PDL (programmatic dependent launch + W2 prefetch) in PAIR mode only while the pairs' W2 slices fit in a third of
# the H200's 50 MB L2. H200, 2026-11-30 (benchmarks/results/kernels/h200_fused_moe_2026-11-30b.csv, ours_pdl_us vs
# ours_us):
# 1.05-1.11x at M = 1 on Qwen3 (12.6 MB), DeepSeek-V3 TP8 (14.7 MB), Maverick TP8 (5.2 MB) and at M = 2 on
# Maverick (10.5 MB); neutral to 0.85x above (Nemotron M = 1: 30 MB; Qwen3 M = 2: 25 MB; Mixtral: 117 MB).
PDL_MAX_W2_BYTES = 16 * 1024 * 1024
# Each split's partial tile is written once and read once by the fix-up (L2), so deep splits are cheap;
# the bound keeps each split ≥ 2 K steps in practice and the static unroll of the fix-up short.
MAX_SPLIT_K = 16


@dataclass(frozen=True)
class MoEKernelConfig:
    """Tile choice for one call; `default_config` picks it, benchmarks may pass their own."""

    pair_mode: bool
    block_n1: int = 64  # GEMM1 weight rows per program (of gate and of up each)
    block_n2: int = 32  # GEMM2 weight rows (hidden outputs) per program
    block_k: int = 128  # K step; must equal the block size for 128x128 block scales
    split_k: int = 1  # GEMM1 K splits
    split_k2: int = 1  # GEMM2 K splits (PAIR mode only)
    num_warps: int = 4
    num_stages: int = 3
    # programmatic dependent launch of GEMM2 (+ W2 prefetch in PAIR mode) and the sum; GPU only (see the kernels);
    # default_config turns it on where the H200 measured a gain (PDL_MAX_W2_BYTES)
    pdl: bool = False
    # GEMM1 launched under PDL too, behind whatever kernel precedes it (the router GEMM, the top-k): it waits for that
    # kernel before its first load, so only the launch latency is saved (issue 33 step 3; GPU only). Off until an H200
    # measures it (benchmarks/kernels/bench_moe_fold.py, router_*_us columns)
    pdl_gemm1: bool = False
    block_m: int = BLOCK_M  # token rows per dot (SCAN mode; PAIR mode always uses BLOCK_M)
    # PAIR mode's top-k sum: False (shipped) sums the k·S2 slices in a fixed order, so a token's output does not depend
    # on which program finishes last; True adds them with fp32 atomics (order-dependent), kept to measure what the
    # deterministic sum costs (benchmarks/kernels/bench_moe_fold.py, kernels_atomic_us)
    atomic_sum: bool = False

    def label(self) -> str:
        mode = "pair" if self.pair_mode else f"scan/m={self.block_m}"
        return (
            f"{mode}/n1={self.block_n1}/n2={self.block_n2}/k={self.block_k}/s1={self.split_k}/s2={self.split_k2}"
            f"/w={self.num_warps}/st={self.num_stages}{'/pdl' if self.pdl else ''}{'/pdl1' if self.pdl_gemm1 else ''}"
            f"{'/atomic' if self.atomic_sum else ''}"
        )


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132  # H200; only shapes the grid on the CPU interpreter


def _split_for(base_programs: int, k: int, block_k: int, target: int) -> int:
    """K splits that bring base_programs up to ~target, each split ≥ 2 K steps where K allows."""
    k_steps = triton.cdiv(k, block_k)
    return max(1, min(MAX_SPLIT_K, math.ceil(target / max(base_programs, 1)), k_steps // 2))


def scan_block_m(num_tokens: int, num_experts: int, top_k: int) -> int:
    """Rows per SCAN-mode chunk: 32 once the mean pairs per hit expert reaches 16, else 16.

    H200, 2026-11-30 (benchmarks/results/kernels/h200_fused_moe_2026-11-30b.csv, column ours_bm16_us): 32 rows made
    Mixtral at M = 64 (16 pairs per expert) 1.26× faster and Qwen3 at M = 256 (16 per expert) no slower, but
    Nemotron at M = 256 (12 per expert) 1.16× slower; 64 rows gained nothing on Mixtral at M = 128 and 256."""
    per_expert = num_tokens * top_k / max(expected_distinct_experts(num_tokens, num_experts, top_k), 1.0)
    return MAX_SCAN_BLOCK_M if per_expert >= 16 else BLOCK_M


def default_config(
    num_tokens: int,
    num_experts: int,
    top_k: int,
    hidden: int,
    inter: int,
    *,
    block_k: int = 128,
    num_sms: int = 132,
    pair_mode: bool | None = None,
) -> MoEKernelConfig:
    """Heuristic tiles: ≥ PROGRAMS_PER_SM programs per SM in every launch, split-K where rows are few.

    Tiles prefer BLOCK_N = 64 (64×128 fp8 = 8 KB per weight tile per stage; GEMM1 loads gate and up,
    16 KB per K step; 3 stages keep 16-48 KB in flight per program) and fall back to 32/16 only when
    the rows are so few that even the deepest split leaves SMs idle. `pair_mode`: the mode to size the tiles for
    (None: use_pair_mode's choice; the bench times both sides of the PAIR/SCAN switch with it)."""
    pair = use_pair_mode(num_tokens, num_experts, top_k) if pair_mode is None else pair_mode
    rows = num_tokens * top_k if pair else expected_distinct_experts(num_tokens, num_experts, top_k)
    target = PROGRAMS_PER_SM * num_sms
    block_n1 = 16
    for bn in (64, 32):
        if rows * triton.cdiv(inter, bn) * min(MAX_SPLIT_K, max(1, hidden // (2 * block_k))) >= target:
            block_n1 = bn
            break
    split = _split_for(math.ceil(rows * triton.cdiv(inter, block_n1)), hidden, block_k, target)
    if not pair:
        block_n2 = 16
        for bn in (64, 32):
            if rows * triton.cdiv(hidden, bn) >= target:
                block_n2 = bn
                break
        return MoEKernelConfig(
            pair_mode=False, block_n1=block_n1, block_n2=block_n2, block_k=block_k, split_k=split,
            block_m=scan_block_m(num_tokens, num_experts, top_k),
        )  # fmt: skip
    pairs = num_tokens * top_k
    # 128 rows per GEMM2 program, the split filling the SMs: 9 of the 12 fastest configs of the H200 sweep
    # (M = 1..8 on Qwen3-30B-A3B, DeepSeek-V3 TP8, Llama-4-Maverick TP8, 2026-11-30) used 128, including at M = 1
    # where fewer, split tiles had been the guess (Maverick 17.9 → 14.8 µs).
    block_n2 = max(16, min(128, triton.next_power_of_2(hidden)))
    split2 = _split_for(pairs * triton.cdiv(hidden, block_n2), inter, block_k, target)
    return MoEKernelConfig(
        pair_mode=True, block_n1=block_n1, block_n2=block_n2, block_k=block_k, split_k=split, split_k2=split2,
        pdl=pairs * hidden * inter <= PDL_MAX_W2_BYTES,
    )  # fmt: skip


def candidate_configs(
    num_tokens: int, num_experts: int, top_k: int, hidden: int, inter: int, *, block_k: int = 128, num_sms: int = 132
) -> list[MoEKernelConfig]:
    """A small sweep around `default_config` for one (shape, M), the default first (≤ ~12 configs:
    each new tile or split depth is a new Triton compile, ~1-2 s on the GPU host).

    Varies what the heuristic guesses at: each GEMM's tile width (with the split that width implies),
    the split depths ×½ and ×2, warps and pipeline stages. benchmarks/kernels/fused_moe_fp8_sweep.py times them."""
    base = default_config(num_tokens, num_experts, top_k, hidden, inter, block_k=block_k, num_sms=num_sms)
    target = PROGRAMS_PER_SM * num_sms
    pair = base.pair_mode
    rows = num_tokens * top_k if pair else expected_distinct_experts(num_tokens, num_experts, top_k)
    k1, k2 = triton.cdiv(hidden, block_k), triton.cdiv(inter, block_k)
    out = [base]

    def add(**changes: int) -> None:
        cfg = MoEKernelConfig(**{**base.__dict__, **changes})
        ok = 1 <= cfg.split_k <= min(MAX_SPLIT_K, k1) and 1 <= cfg.split_k2 <= min(MAX_SPLIT_K, k2)
        if ok and (pair or cfg.split_k2 == 1) and cfg not in out:
            out.append(cfg)

    for bn1 in (32, 64, 128):
        add(block_n1=bn1, split_k=_split_for(math.ceil(rows * triton.cdiv(inter, bn1)), hidden, block_k, target))
    add(split_k=base.split_k * 2)
    add(split_k=max(1, base.split_k // 2))
    if pair:
        for bn2 in (32, 64, 128):
            add(block_n2=bn2, split_k2=_split_for(int(rows) * triton.cdiv(hidden, bn2), inter, block_k, target))
        add(split_k2=base.split_k2 * 2)
        add(split_k2=max(1, base.split_k2 // 2))
    else:
        for bn2 in (32, 64, 128):
            add(block_n2=bn2)
        add(block_m=max(BLOCK_M, base.block_m // 2))
        add(block_m=min(MAX_SCAN_BLOCK_M, base.block_m * 2))
    add(num_warps=8)
    add(num_stages=4)
    return out


def call_config(
    hidden: torch.Tensor,
    w2: torch.Tensor,
    top_k: int,
    block_shape: tuple[int, int] | list[int] | None = None,
    config: MoEKernelConfig | None = None,
) -> MoEKernelConfig:
    """The config `fused_moe_fp8` runs for these arguments: `config`, else `default_config`'s choice for hidden (T, H)
    and w2 (E, H, I) on hidden's device (a caller that changes one field of it, e.g. the plugin's pdl_gemm1)."""
    if config is not None:
        return config
    e, h, inter = w2.shape
    group = int(block_shape[0]) if block_shape is not None else 128
    return default_config(hidden.shape[0], e, top_k, h, inter, block_k=group, num_sms=_num_sms(hidden.device))


def _shape(t: torch.Tensor) -> str:
    return f"{tuple(t.shape)} {t.dtype}"


def _scale_mode(
    name: str, scale: torch.Tensor, e: int, n: int, k: int, block: tuple[int, int] | None
) -> tuple[int, torch.Tensor]:
    """Classify a weight scale tensor and return (W_SCALE mode, float32 3-D view (E, rows, cols))."""
    if scale.dtype != torch.float32:
        raise ValueError(f"{name} must be float32, got {_shape(scale)}")
    if block is not None:
        want = (e, triton.cdiv(n, block[0]), triton.cdiv(k, block[1]))
        if tuple(scale.shape) != want:
            raise ValueError(f"{name} for block_shape={list(block)} must have shape {want}, got {_shape(scale)}")
        return K.W_SCALE_BLOCK, scale
    if scale.numel() == e:
        return K.W_SCALE_TENSOR, scale.reshape(e, 1, 1)
    if tuple(scale.shape) in ((e, n), (e, n, 1)):
        return K.W_SCALE_CHANNEL, scale.reshape(e, n, 1)
    raise ValueError(
        f"{name} must be per-tensor (E,)=({e},) or per-channel (E, N)=({e}, {n}) "
        f"(or pass block_shape for block scales), got {_shape(scale)}"
    )


def _validate(hidden, w13, w2, topk_weights, topk_ids, a13_scale, a2_scale, block_shape, gated) -> None:
    if hidden.dim() != 2 or hidden.dtype not in FLOAT_DTYPES:
        raise ValueError(f"hidden must be (T, H) bf16/fp16/fp32, got {_shape(hidden)}")
    t, h = hidden.shape
    n1 = "2I" if gated else "I"
    if w13.dim() != 3 or w13.dtype != FP8_DTYPE or w13.shape[2] != h or (gated and w13.shape[1] % 2):
        raise ValueError(f"w13 must be (E, {n1}, H={h}) float8_e4m3fn, got {_shape(w13)}")
    e, rows, _ = w13.shape
    inter = rows // 2 if gated else rows
    if tuple(w2.shape) != (e, h, inter) or w2.dtype != FP8_DTYPE:
        raise ValueError(f"w2 must be (E, H, I)=({e}, {h}, {inter}) float8_e4m3fn, got {_shape(w2)}")
    if topk_ids.dim() != 2 or topk_ids.shape[0] != t or topk_ids.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"topk_ids must be (T={t}, k) int32/int64, got {_shape(topk_ids)}")
    if tuple(topk_weights.shape) != tuple(topk_ids.shape) or not topk_weights.dtype.is_floating_point:
        raise ValueError(
            f"topk_weights must be float {tuple(topk_ids.shape)} like topk_ids, got {_shape(topk_weights)}"
        )
    for name, s in (("a13_scale", a13_scale), ("a2_scale", a2_scale)):
        if s is not None and (s.numel() != 1 or s.dtype != torch.float32):
            raise ValueError(f"{name} must be a static per-tensor float32 scale of 1 element or None, got {_shape(s)}")
    if block_shape is not None and (len(block_shape) != 2 or block_shape[0] != block_shape[1]):
        raise ValueError(f"block_shape must be [B, B] (square blocks, e.g. [128, 128]), got {block_shape}")
    tensors = (hidden, w13, w2, topk_weights, topk_ids)
    if len({x.device for x in tensors}) != 1:
        raise ValueError(f"all tensors must be on one device, got {[str(x.device) for x in tensors]}")
    if w13.stride(2) != 1 or w2.stride(2) != 1 or hidden.stride(1) != 1:
        raise ValueError("w13, w2 and hidden must be contiguous in their last dimension")


def fused_moe_fp8(
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
    block_shape: tuple[int, int] | list[int] | None = None,
    activation: str = "silu",
    out: torch.Tensor | None = None,
    config: MoEKernelConfig | None = None,
    routing: LogitsRouting | None = None,
) -> torch.Tensor:
    """FP8 (w8a8) mixture-of-experts layer: Σ_k topk_weights · W2[e] · SiLU(W1[e]·x) ⊙ (W3[e]·x).

    hidden (T, H) bf16/fp16/fp32; w13 (E, 2I, H) float8_e4m3fn, rows [0, I) gate (W1), [I, 2I) up
    (W3); w2 (E, H, I) float8_e4m3fn; topk_weights (T, k) float; topk_ids (T, k) int32/int64 in [0, E), or
    negative for a slot with no expert (vLLM's padding rows, another rank's expert): it adds nothing, whatever its
    weight, so the caller needs no masking kernels (PAIR mode reads no weights for it; SCAN mode computes it with
    expert 0's and weighs it 0).
    Weight scales (float32): per-tensor (E,), per-channel (E, 2I) / (E, H), or with
    block_shape=[B, B] (E, ⌈2I/B⌉, ⌈H/B⌉) / (E, ⌈H/B⌉, ⌈I/B⌉). Activation scales: (1,) float32 static,
    or None for dynamic (one scale per token row; per token and B-wide K group with block scales).
    activation "silu" (gated, as above) or "relu2" (non-gated relu(W1·x)², w13 is (E, I, H): Nemotron-3).
    Returns (T, H) in hidden's dtype, written into `out` when given (T, H) of that dtype. Expert ids
    are not range-checked on the device.
    routing: route from the router's logits instead (ops.moe_routing.LogitsRouting); topk_ids (int32) and
    topk_weights (float32), contiguous, are then written, not read. PAIR mode routes inside both GEMMs (no routing
    launch); SCAN mode launches moe_route_kernel first. `fused_moe_fp8_from_logits` allocates them for you.
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
    gated = ACTIVATIONS[activation]
    block = tuple(int(b) for b in block_shape) if block_shape is not None else None
    _validate(hidden, w13, w2, topk_weights, topk_ids, a13_scale, a2_scale, block, gated)
    t, h = hidden.shape
    e, two_i, _ = w13.shape
    if routing is not None:
        routing.validate(t, e)
        if routing.top_k != topk_ids.shape[1]:
            raise ValueError(f"routing.top_k={routing.top_k} but topk_ids has {topk_ids.shape[1]} slots")
        for name, x, dtype in (("topk_ids", topk_ids, torch.int32), ("topk_weights", topk_weights, torch.float32)):
            if x.dtype != dtype or not x.is_contiguous():
                raise ValueError(f"{name} is written when routing from logits: contiguous {dtype}, got {_shape(x)}")
    inter = two_i // 2 if gated else two_i
    top_k = topk_ids.shape[1]
    mode1, s13 = _scale_mode("w13_scale", w13_scale, e, two_i, h, block)
    mode2, s2 = _scale_mode("w2_scale", w2_scale, e, h, inter, block)
    if mode1 != mode2:
        raise ValueError(f"w13_scale {_shape(w13_scale)} and w2_scale {_shape(w2_scale)} are different scale kinds")
    group = block[0] if block is not None else 128
    cfg = call_config(hidden, w2, top_k, block, config)
    if block is not None and cfg.block_k != group:
        raise ValueError(f"block_k={cfg.block_k} must equal the block size {group} with block scales")
    if cfg.block_n1 % 16 or cfg.block_n2 % 16 or cfg.block_k < 32:
        raise ValueError(f"tiles must be multiples of 16 with block_k ≥ 32 (fp8 dot), got {cfg}")
    if not 1 <= cfg.split_k <= MAX_SPLIT_K or not 1 <= cfg.split_k2 <= MAX_SPLIT_K:
        raise ValueError(f"split_k and split_k2 must be in 1..{MAX_SPLIT_K}, got {cfg}")
    if cfg.block_m not in (BLOCK_M, MAX_SCAN_BLOCK_M) or (cfg.pair_mode and cfg.block_m != BLOCK_M):
        raise ValueError(f"block_m must be 16 or 32 (16 in PAIR mode), got {cfg}")
    if not cfg.pair_mode and cfg.split_k2 != 1:
        raise ValueError(f"split_k2 > 1 needs pair_mode=True (SCAN mode's GEMM2 does not split K), got {cfg}")

    dev = hidden.device
    num_pairs = t * top_k
    ids = topk_ids.reshape(-1).to(torch.int32)
    weights = topk_weights.reshape(-1).to(torch.float32)
    if out is None:
        out = torch.empty_like(hidden)
    elif out.shape != hidden.shape or out.dtype != hidden.dtype or out.stride(1) != 1:
        raise ValueError(f"out must be {_shape(hidden)} contiguous in H, got {_shape(out)}")
    if t == 0:
        return out
    split1 = _splits(h, cfg.split_k, cfg.block_k)
    split2 = _splits(inter, cfg.split_k2, cfg.block_k)
    rows1 = num_pairs if cfg.pair_mode else e
    tiles1, tiles2 = triton.cdiv(inter, cfg.block_n1), triton.cdiv(h, cfg.block_n2)
    fix2 = cfg.pair_mode and top_k * split2[1] > 1
    n_c1 = rows1 * tiles1 if split1[1] > 1 else 0  # GEMM1 fix-up counters; GEMM2's follow them
    counters = _counters(dev, n_c1 + (t * tiles2 if fix2 else 0))
    c1, c2 = counters, counters[n_c1:]
    partials = torch.empty((split1[1] if split1[1] > 1 else 0, num_pairs, two_i), dtype=torch.float32, device=dev)
    act = torch.empty((num_pairs, inter), dtype=torch.float32, device=dev)
    atomic = fix2 and cfg.atomic_sum
    if cfg.pair_mode:
        pair_list = count = ids  # unused in PAIR mode
        if atomic:
            scratch = _zeroed(_ACCUMULATORS, dev, t * h, torch.float32)
        else:
            scratch = torch.empty((split2[1] if fix2 else 0, num_pairs, h), dtype=torch.float32, device=dev)
    else:
        pair_list = torch.empty((e, num_pairs), dtype=torch.int32, device=dev)
        count = torch.empty((e,), dtype=torch.int32, device=dev)
        scratch = torch.empty((num_pairs, h), dtype=torch.float32, device=dev)
    dummy = weights  # any float32 tensor where a static scale is absent
    a13 = a13_scale if a13_scale is not None else dummy
    a2 = a2_scale if a2_scale is not None else dummy
    # PDL needs the GPU's griddepcontrol; the CPU interpreter (cpu tensors) runs the plain launches
    pdl = cfg.pdl and dev.type != "cpu"
    wait_prev = cfg.pdl_gemm1 and dev.type != "cpu"
    common = dict(W_SCALE=mode1, GROUP=group, PAIR_MODE=cfg.pair_mode, AMAX_BLOCK=AMAX_BLOCK, BLOCK_M=cfg.block_m,
                  BLOCK_K=cfg.block_k, num_warps=cfg.num_warps, num_stages=cfg.num_stages, PDL=pdl)  # fmt: skip
    if routing is not None and not cfg.pair_mode:  # SCAN mode's programs belong to experts: route first
        route(routing, topk_weights, topk_ids)
        routing = None
    route_args, route_meta = _route_launch_args(routing, e, dummy)
    route_meta = {**route_meta, "ROUTE": routing is not None}

    K.moe_gemm1_kernel[(rows1, tiles1, split1[1])](
        hidden, w13, s13, a13, ids, weights, *route_args[:3], pair_list, count, partials, c1, act,
        num_pairs, h, inter, split1[0], hidden.stride(0), w13.stride(0), w13.stride(1),
        s13.stride(0), s13.stride(1), s13.stride(2), *route_args[3:], **route_meta,
        TOPK=top_k, A_STATIC=a13_scale is not None, GATED=gated, SPLIT=split1[1], SCAN_BLOCK=SCAN_BLOCK,
        BLOCK_N=cfg.block_n1, WAIT_PREV=wait_prev, launch_pdl=wait_prev, **common,
    )  # fmt: skip
    grid2 = (num_pairs, tiles2, split2[1]) if cfg.pair_mode else (e, tiles2)
    K.moe_gemm2_kernel[grid2](
        act, w2, s2, a2, ids, weights, *route_args[:3], pair_list, count, scratch, c2, out,
        num_pairs, h, inter, split2[0], w2.stride(0), w2.stride(1), s2.stride(0), s2.stride(1), s2.stride(2),
        out.stride(0), *route_args[3:], **route_meta,
        TOPK=top_k, A_STATIC=a2_scale is not None, SPLIT=split2[1], ATOMIC_SUM=atomic, BLOCK_N=cfg.block_n2,
        launch_pdl=pdl, **common,
    )  # fmt: skip
    if not cfg.pair_mode:
        K.moe_sum_kernel[(t, triton.cdiv(h, 512))](
            scratch, out, h, out.stride(0), TOPK=top_k, BLOCK_N=512, PDL=pdl, launch_pdl=pdl
        )
    return out


def _route_launch_args(routing: LogitsRouting | None, num_experts: int, dummy: torch.Tensor) -> tuple[tuple, dict]:
    """((logits, bias, padding, num_experts, logits row stride, scale), constexprs) of a routing launch; fixed
    placeholders without routing, so the kernels compiled for precomputed ids stay the same ones."""
    if routing is None:
        return (dummy, dummy, dummy, num_experts, 0, 1.0), dict(
            SCORING=0, HAS_BIAS=False, RENORM=False, HAS_PAD=False, BLOCK_E=16, RANK_CHUNK=16
        )
    pad = routing.is_padding
    args = (routing.logits, routing.bias if routing.bias is not None else dummy, pad if pad is not None else dummy,
            num_experts, routing.logits.stride(0), float(routing.scale))  # fmt: skip
    block_e = max(16, triton.next_power_of_2(num_experts))
    return args, dict(
        SCORING=SCORINGS[routing.scoring], HAS_BIAS=routing.bias is not None, RENORM=routing.renormalize,
        HAS_PAD=pad is not None, BLOCK_E=block_e, RANK_CHUNK=min(RANK_CHUNK, block_e),
    )  # fmt: skip


def route(routing: LogitsRouting, topk_weights: torch.Tensor, topk_ids: torch.Tensor) -> None:
    """Write `routing`'s top-k into topk_weights ((T, k) float32) and topk_ids ((T, k) int32), one launch
    (moe_route_kernel): for a caller that needs the routing without our GEMMs."""
    t, k = topk_ids.shape
    routing.validate(t, routing.logits.shape[1])
    if t == 0:
        return
    args, meta = _route_launch_args(routing, routing.logits.shape[1], topk_weights)
    moe_route_kernel[(t * k,)](*args[:3], topk_ids, topk_weights, *args[3:], TOPK=k, **meta)


def fused_moe_fp8_from_logits(
    hidden: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    routing: LogitsRouting,
    **kwargs: object,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`fused_moe_fp8` routed from `routing`'s logits: (out, topk_weights (T, k) float32, topk_ids (T, k) int32).

    The MoE block in two launches at small M (PAIR mode): the router's top-k folded into both GEMMs."""
    t = hidden.shape[0]
    ids = torch.empty((t, routing.top_k), dtype=torch.int32, device=hidden.device)
    weights = torch.empty((t, routing.top_k), dtype=torch.float32, device=hidden.device)
    out = fused_moe_fp8(hidden, w13, w2, weights, ids, routing=routing, **kwargs)  # type: ignore[arg-type]
    return out, weights, ids


def _splits(k: int, split: int, block_k: int) -> tuple[int, int]:
    """(K per split rounded up to whole BLOCK_K steps, the number of non-empty splits that gives)."""
    per = triton.cdiv(triton.cdiv(k, split), block_k) * block_k
    return per, triton.cdiv(k, per)


_COUNTERS: dict[torch.device, torch.Tensor] = {}
_ACCUMULATORS: dict[torch.device, torch.Tensor] = {}  # atomic_sum's (T, H) fp32 sums, zero between launches
_RETIRED: list[torch.Tensor] = []  # outgrown buffers: a captured CUDA graph may still point at them


def _capturing(device: torch.device) -> bool:
    """True while the current stream of `device` is capturing a CUDA graph (a function, so tests can patch it)."""
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


def _counters(device: torch.device, n: int) -> torch.Tensor:
    """≥ n zeroed int32 arrival counters on `device`, shared by all calls (see the module docstring:
    the kernels leave them at zero)."""
    return _zeroed(_COUNTERS, device, n, torch.int32)


def _zeroed(store: dict[torch.device, torch.Tensor], device: torch.device, n: int, dtype: torch.dtype) -> torch.Tensor:
    """≥ n zeros of `dtype` on `device` that every call shares and the kernels leave at zero (the arrival counters,
    the atomic sum's accumulators). Grows by doubling; outgrown buffers are kept alive (never freed) because CUDA
    graphs captured earlier hold their raw addresses, not a reference."""
    buf = store.get(device)
    if (buf is None or buf.numel() < n) and _capturing(device):
        # Inside a CUDA-graph capture torch.zeros only records its fill: the memory stays unwritten until the
        # graph replays. Installed as the shared buffer, an eager call before that replay would count from
        # garbage, so this graph gets a private buffer, zeroed by its own fill node on every replay.
        return torch.zeros(max(n, 1), dtype=dtype, device=device)
    if buf is None or buf.numel() < n:
        old = 0
        if buf is not None:
            old = buf.numel()
            _RETIRED.append(buf)
        buf = torch.zeros(max(n, 2 * old, 1024), dtype=dtype, device=device)
        store[device] = buf
    return buf
