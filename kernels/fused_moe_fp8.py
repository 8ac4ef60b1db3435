"""Our FP8 fused MoE for decode: `fused_moe_fp8(...)`, its validation, tile heuristics and launches.

Kernels and the data flow live in kernels/fused_moe_fp8_kernels.py; routing modes in
kernels/moe_routing.py. Two launches at small M (PAIR mode: GEMM1, GEMM2 with the top-k reduction
inside), three at larger M (SCAN mode: GEMM1, GEMM2, sum). vLLM's Triton path uses six or seven
(align, input quant, GEMM1, SiLU·mul, quant, GEMM2, sum).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton

from kernels import fused_moe_fp8_kernels as K
from kernels.moe_routing import expected_distinct_experts, use_pair_mode

FP8_DTYPE = torch.float8_e4m3fn
FLOAT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
# Tokens per expert handled per dot. 16 is the smallest row count of a Triton fp8 dot; decode puts
# 1-16 tokens on an expert, so larger blocks only add masked rows.
BLOCK_M = 16
# Pairs scanned per step when a SCAN-mode program collects its expert's pairs (≤ 2048 pairs at M=256).
SCAN_BLOCK = 1024
# Programs we want per launch per SM: enough loads in flight to stream weights at full bandwidth.
PROGRAMS_PER_SM = 3
ACTIVATIONS = {"silu": True, "relu2": False}  # name → gated
MAX_SPLIT_K = 8  # GEMM2's prologue re-reads every split's partials: keep that traffic bounded


@dataclass(frozen=True)
class MoEKernelConfig:
    """Tile choice for one call; `default_config` picks it, benchmarks may pass their own."""

    pair_mode: bool
    block_n1: int = 64  # GEMM1 weight rows per program (of gate and of up each)
    block_n2: int = 32  # GEMM2 weight rows (hidden outputs) per program
    block_k: int = 128  # K step; must equal the block size for 128x128 block scales
    split_k: int = 1  # GEMM1 K splits
    num_warps: int = 4
    num_stages: int = 3


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132  # H200; only shapes the grid on the CPU interpreter


def default_config(
    num_tokens: int, num_experts: int, top_k: int, hidden: int, inter: int, *, block_k: int = 128, num_sms: int = 132
) -> MoEKernelConfig:
    """Heuristic tiles: enough programs for every SM to stream weights, split-K where rows are few."""
    pair = use_pair_mode(num_tokens, num_experts, top_k)
    rows = num_tokens * top_k if pair else expected_distinct_experts(num_tokens, num_experts, top_k)
    target = PROGRAMS_PER_SM * num_sms
    k_steps = triton.cdiv(hidden, block_k)
    block_n1 = 16
    for bn in (64, 32):
        if rows * triton.cdiv(inter, bn) * MAX_SPLIT_K >= target:
            block_n1 = bn
            break
    base = rows * triton.cdiv(inter, block_n1)
    split = max(1, min(MAX_SPLIT_K, math.ceil(target / base), k_steps // 2))
    out_rows = num_tokens if pair else rows
    block_n2 = 16
    for bn in (64, 32):
        if out_rows * triton.cdiv(hidden, bn) >= target:
            block_n2 = bn
            break
    return MoEKernelConfig(pair_mode=pair, block_n1=block_n1, block_n2=block_n2, block_k=block_k, split_k=split)


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
) -> torch.Tensor:
    """FP8 (w8a8) mixture-of-experts layer: Σ_k topk_weights · W2[e] · SiLU(W1[e]·x) ⊙ (W3[e]·x).

    hidden (T, H) bf16/fp16/fp32; w13 (E, 2I, H) float8_e4m3fn, rows [0, I) gate (W1), [I, 2I) up
    (W3); w2 (E, H, I) float8_e4m3fn; topk_weights (T, k) float; topk_ids (T, k) int32/int64 in [0, E).
    Weight scales (float32): per-tensor (E,), per-channel (E, 2I) / (E, H), or with
    block_shape=[B, B] (E, ⌈2I/B⌉, ⌈H/B⌉) / (E, ⌈H/B⌉, ⌈I/B⌉). Activation scales: (1,) float32 static,
    or None for dynamic (one scale per token row; per token and B-wide K group with block scales).
    activation "silu" (gated, as above) or "relu2" (non-gated relu(W1·x)², w13 is (E, I, H): Nemotron-3).
    Returns (T, H) in hidden's dtype, written into `out` when given (T, H) of that dtype. Expert ids
    are not range-checked on the device.
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
    gated = ACTIVATIONS[activation]
    block = tuple(int(b) for b in block_shape) if block_shape is not None else None
    _validate(hidden, w13, w2, topk_weights, topk_ids, a13_scale, a2_scale, block, gated)
    t, h = hidden.shape
    e, two_i, _ = w13.shape
    inter = two_i // 2 if gated else two_i
    top_k = topk_ids.shape[1]
    mode1, s13 = _scale_mode("w13_scale", w13_scale, e, two_i, h, block)
    mode2, s2 = _scale_mode("w2_scale", w2_scale, e, h, inter, block)
    if mode1 != mode2:
        raise ValueError(f"w13_scale {_shape(w13_scale)} and w2_scale {_shape(w2_scale)} are different scale kinds")
    group = block[0] if block is not None else 128
    cfg = config or default_config(t, e, top_k, h, inter, block_k=group, num_sms=_num_sms(hidden.device))
    if block is not None and cfg.block_k != group:
        raise ValueError(f"block_k={cfg.block_k} must equal the block size {group} with block scales")
    if cfg.block_n1 % 16 or cfg.block_n2 % 16 or cfg.block_k < 32:
        raise ValueError(f"tiles must be multiples of 16 with block_k ≥ 32 (fp8 dot), got {cfg}")

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
    k_per_split = triton.cdiv(triton.cdiv(h, cfg.split_k), cfg.block_k) * cfg.block_k
    split = triton.cdiv(h, k_per_split)
    partials = torch.empty((split, num_pairs, two_i), dtype=torch.float32, device=dev)  # two_i = N1
    if cfg.pair_mode:
        pair_list = count = ids  # unused in PAIR mode
    else:
        pair_list = torch.empty((e, num_pairs), dtype=torch.int32, device=dev)
        count = torch.empty((e,), dtype=torch.int32, device=dev)
    dummy = weights  # any float32 tensor where a static scale is absent
    a13 = a13_scale if a13_scale is not None else dummy
    a2 = a2_scale if a2_scale is not None else dummy
    common = dict(W_SCALE=mode1, GROUP=group, BLOCK_M=BLOCK_M, BLOCK_K=cfg.block_k)
    launch = dict(num_warps=cfg.num_warps, num_stages=cfg.num_stages)

    rows1 = num_pairs if cfg.pair_mode else e
    K.moe_gemm1_kernel[(rows1, triton.cdiv(inter, cfg.block_n1), split)](
        hidden, w13, s13, a13, ids, pair_list, count, partials,
        num_pairs, h, inter, k_per_split, hidden.stride(0), w13.stride(0), w13.stride(1),
        s13.stride(0), s13.stride(1), s13.stride(2),
        TOPK=top_k, A_STATIC=a13_scale is not None, PAIR_MODE=cfg.pair_mode, GATED=gated, SCAN_BLOCK=SCAN_BLOCK,
        BLOCK_N=cfg.block_n1, **common, **launch,
    )  # fmt: skip
    pair_out = out if cfg.pair_mode else torch.empty((num_pairs, h), dtype=torch.float32, device=dev)
    rows2 = t if cfg.pair_mode else e
    K.moe_gemm2_kernel[(rows2, triton.cdiv(h, cfg.block_n2))](
        partials, w2, s2, a2, ids, weights, pair_list, count, pair_out,
        num_pairs, h, inter, w2.stride(0), w2.stride(1), s2.stride(0), s2.stride(1), s2.stride(2), out.stride(0),
        TOPK=top_k, A_STATIC=a2_scale is not None, SPLIT=split, PAIR_MODE=cfg.pair_mode, GATED=gated,
        BLOCK_N=cfg.block_n2, **common, **launch,
    )  # fmt: skip
    if not cfg.pair_mode:
        K.moe_sum_kernel[(t, triton.cdiv(h, 512))](pair_out, out, h, out.stride(0), TOPK=top_k, BLOCK_N=512)
    return out
