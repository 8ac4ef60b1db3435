"""Routing for our fused MoE without vLLM's sort/align pass.

Two ways to assign (token, slot) pairs to programs, picked on the host from the expected number of
distinct experts:

- PAIR mode (small M): one program row per pair; the expert id is read straight from `topk_ids`.
  No alignment at all. Pairs that share an expert read its weights twice (mostly from L2 while the
  programs run concurrently), so it is used only while pairs ≈ distinct experts.
- SCAN mode (larger M): one program row per expert; the program scans `topk_ids` (≤ 2048 int32,
  L2-resident) and compacts the indices of its pairs into a scratch list (`expert_pair_list`), then
  walks them in chunks of BLOCK_M rows. Empty experts exit after the scan. GEMM1 stores the count and
  list, GEMM2 reuses them, so no separate alignment launch exists.

Routing from the router's logits (`route_slot`, issue 33): the top-k a router computes before our kernels, done by
the kernels themselves, so the router's top-k launch (vLLM's `topk_softmax`) goes away. Every program that needs a
pair's expert recomputes its token's routing from the logits row (E ≤ 512 floats, from L2): the same instructions
on the same inputs give the same answer in every program, so GEMM1 and GEMM2 agree without passing ids between
them, and GEMM2 may still read its pair's expert before GEMM1 finishes (its W2 prefetch under PDL).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

SCORINGS = {"softmax": 0, "sigmoid": 1}  # the router's score function → constexpr SCORING
# Experts ranked per step of the top-k: (BLOCK_E, RANK_CHUNK) comparisons at a time keep the registers a program
# needs for its routing small before its GEMM's accumulators are live.
RANK_CHUNK = 32

# Re-reading an expert's weights for a second pair costs HBM bytes unless L2 catches it; allow pair
# mode while pairs ≤ this factor × the expected distinct experts (30% extra bytes at worst).
PAIR_MODE_SLACK = 1.3


def expected_distinct_experts(num_tokens: int, num_experts: int, top_k: int) -> float:
    """E · (1 − (1 − k/E)^M): distinct experts hit by M tokens under uniform routing."""
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** num_tokens)


def use_pair_mode(num_tokens: int, num_experts: int, top_k: int) -> bool:
    """Pair mode while the weight re-reads it causes stay small (see PAIR_MODE_SLACK)."""
    pairs = num_tokens * top_k
    return pairs <= max(top_k, math.floor(PAIR_MODE_SLACK * expected_distinct_experts(num_tokens, num_experts, top_k)))


@triton.jit
def expert_pair_list(ids_ptr, list_ptr, count_ptr, expert, num_pairs, SCAN_BLOCK: tl.constexpr):
    """Compact the indices p with ids[p] == expert into list_ptr[0:count]; store and return count.

    ids_ptr: (P,) int32 expert id per (token, slot) pair; list_ptr: this expert's (P,) int32 row of
    the scratch; count_ptr: this expert's int32 counter. Several programs of the same expert write
    identical values to the same places (benign); the barrier makes the list visible to the whole
    program before it is read back."""
    count = 0
    for start in range(0, num_pairs, SCAN_BLOCK):
        offs = start + tl.arange(0, SCAN_BLOCK)
        ids = tl.load(ids_ptr + offs, mask=offs < num_pairs, other=-1)
        ids = tl.where((ids < 0) & (offs < num_pairs), 0, ids)  # a pair without an expert goes to expert 0, weight 0
        hit = (ids == expert).to(tl.int32)
        pos = count + tl.cumsum(hit, 0) - 1
        tl.store(list_ptr + pos, offs, mask=hit > 0)
        count += tl.sum(hit, 0)
    tl.store(count_ptr, count)
    tl.debug_barrier()
    return count


def routing_histogram(topk_ids: torch.Tensor, num_experts: int) -> torch.Tensor:
    """Pairs per expert (E,) int64: the reference the routing tests compare the scratch counts with."""
    return torch.bincount(topk_ids.reshape(-1).long(), minlength=num_experts)


@dataclass(frozen=True)
class LogitsRouting:
    """How a router turns a token's logits into k (expert, weight) pairs, as vLLM's fused top-k routers do.

    scores = softmax(logits) or sigmoid(logits); the k experts with the largest scores (+ `bias` when given: the
    selection-only score correction of sigmoid routers; ties to the lower expert id, as vLLM's topk_softmax); their
    weights are their scores, divided by the k scores' sum when `renormalize`, times `scale`. A token whose
    `is_padding` entry is true gets id -1 in every slot (weight 0), as vLLM 0.32 marks CUDA-graph padding rows.
    """

    logits: torch.Tensor  # (T, E) float, contiguous in E
    top_k: int
    scoring: str = "softmax"
    renormalize: bool = True
    bias: torch.Tensor | None = None  # (E,) float32
    scale: float = 1.0
    is_padding: torch.Tensor | None = None  # (T,) bool or integer, nonzero = padding

    def validate(self, num_tokens: int, num_experts: int) -> None:
        logits, shape = self.logits, f"{tuple(self.logits.shape)} {self.logits.dtype}"
        if logits.dim() != 2 or tuple(logits.shape) != (num_tokens, num_experts) or not logits.dtype.is_floating_point:
            raise ValueError(f"router_logits must be float (T={num_tokens}, E={num_experts}), got {shape}")
        if logits.stride(1) != 1:
            raise ValueError("router_logits must be contiguous in its last dimension")
        if self.scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {sorted(SCORINGS)}, got {self.scoring!r}")
        if not 1 <= self.top_k <= num_experts:
            raise ValueError(f"top_k must be in 1..E={num_experts}, got {self.top_k}")
        if self.bias is not None and (tuple(self.bias.shape) != (num_experts,) or self.bias.dtype != torch.float32):
            raise ValueError(
                f"bias must be (E,)=({num_experts},) float32, got {tuple(self.bias.shape)} {self.bias.dtype}"
            )
        pad = self.is_padding
        if pad is not None and (pad.dim() != 1 or pad.shape[0] < num_tokens or pad.dtype.is_floating_point):
            raise ValueError(
                f"is_padding must be (≥ T={num_tokens},) bool or integer, got {tuple(pad.shape)} {pad.dtype}"
            )


@triton.jit
def _scores(logits_ptr, offs, mask, mx, total, SCORING: tl.constexpr):
    """Float32 scores of the experts at `offs`: softmax with the row's max `mx` and sum `total`, or sigmoid."""
    logit = tl.load(logits_ptr + offs, mask=mask, other=float("-inf")).to(tl.float32)
    if SCORING == 0:
        return tl.where(mask, tl.exp(logit - mx) / total, 0.0)
    else:
        return tl.where(mask, 1.0 / (1.0 + tl.exp(-logit)), 0.0)


@triton.jit
def _keys(logits_ptr, bias_ptr, offs, mask, mx, total, SCORING: tl.constexpr, HAS_BIAS: tl.constexpr):
    """(scores, selection keys) at `offs`; keys are -inf outside the experts so they rank last."""
    s = _scores(logits_ptr, offs, mask, mx, total, SCORING)
    key = s
    if HAS_BIAS:
        key = s + tl.load(bias_ptr + offs, mask=mask, other=0.0)
    return s, tl.where(mask, key, float("-inf"))


@triton.jit
def route_slot(
    logits_ptr, bias_ptr, pad_ptr, token, slot, num_experts, stride_lt, scale,
    TOPK: tl.constexpr, SCORING: tl.constexpr, HAS_BIAS: tl.constexpr, RENORM: tl.constexpr,
    HAS_PAD: tl.constexpr, BLOCK_E: tl.constexpr, RANK_CHUNK: tl.constexpr,
):  # fmt: skip
    """(expert id int32, routing weight float32) of slot `slot` of `token` (see LogitsRouting).

    An expert's rank is the number of experts whose key is larger, or equal with a lower id; slot j is the expert of
    rank j. Counting ranks in (BLOCK_E, RANK_CHUNK) blocks is one reduction per block instead of k dependent arg-max
    rounds. The id is clamped into [0, E): NaN logits (a garbage padding row) then pick some expert rather than read
    out of bounds."""
    row = logits_ptr + token.to(tl.int64) * stride_lt
    offs = tl.arange(0, BLOCK_E)
    mask = offs < num_experts
    mx = 0.0
    total = 1.0
    if SCORING == 0:
        logit = tl.load(row + offs, mask=mask, other=float("-inf")).to(tl.float32)
        mx = tl.max(logit, axis=0)
        total = tl.sum(tl.where(mask, tl.exp(logit - mx), 0.0), axis=0)
    s, key = _keys(row, bias_ptr, offs, mask, mx, total, SCORING, HAS_BIAS)
    rank = tl.zeros((BLOCK_E,), tl.int32)
    for c in range(0, num_experts, RANK_CHUNK):
        offs_c = c + tl.arange(0, RANK_CHUNK)
        _, key_c = _keys(row, bias_ptr, offs_c, offs_c < num_experts, mx, total, SCORING, HAS_BIAS)
        beats = (key_c[None, :] > key[:, None]) | ((key_c[None, :] == key[:, None]) & (offs_c[None, :] < offs[:, None]))
        rank += tl.sum(beats.to(tl.int32), axis=1)
    mine = (rank == slot) & mask
    expert = tl.minimum(tl.maximum(tl.sum(tl.where(mine, offs, 0), axis=0), 0), num_experts - 1)
    weight = tl.sum(tl.where(mine, s, 0.0), axis=0)
    if RENORM:
        weight = weight / tl.sum(tl.where((rank < TOPK) & mask, s, 0.0), axis=0)
    weight = weight * scale
    if HAS_PAD:
        padding = tl.load(pad_ptr + token) != 0
        expert = tl.where(padding, -1, expert)
        weight = tl.where(padding, 0.0, weight)
    return expert.to(tl.int32), weight


@triton.jit
def moe_route_kernel(
    logits_ptr, bias_ptr, pad_ptr, ids_ptr, weights_ptr, num_experts, stride_lt, scale,
    TOPK: tl.constexpr, SCORING: tl.constexpr, HAS_BIAS: tl.constexpr, RENORM: tl.constexpr,
    HAS_PAD: tl.constexpr, BLOCK_E: tl.constexpr, RANK_CHUNK: tl.constexpr,
):  # fmt: skip
    """Grid (T·k,): pair p = (token p // k, slot p % k) gets its expert and weight (SCAN mode, where the GEMMs'
    programs belong to experts, not pairs, and so cannot route for themselves)."""
    p = tl.program_id(0)
    expert, weight = route_slot(
        logits_ptr, bias_ptr, pad_ptr, p // TOPK, p % TOPK, num_experts, stride_lt, scale,
        TOPK, SCORING, HAS_BIAS, RENORM, HAS_PAD, BLOCK_E, RANK_CHUNK,
    )  # fmt: skip
    tl.store(ids_ptr + p, expert)
    tl.store(weights_ptr + p, weight)
