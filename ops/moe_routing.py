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
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

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
