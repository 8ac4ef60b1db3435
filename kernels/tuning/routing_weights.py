"""The skewed routing the benchmarks run beside uniform routing: a few hot experts per MoE layer.

Trained routers are uneven: some experts of a layer take far more tokens than others. `hot_expert_weights` gives
HOT_SHARE of the routing mass to the first `hot_count(E, k)` experts and spreads the rest over the others; a
routing samples top-k distinct experts with these chances (Gumbel top-k: `log w − log(−log U)`, then top-k). The
kernel bench (kernels/tuning/moe_harness.py, routing "hot") and the served engine (benchmarks/e2e/routing_plugin.py,
vLLM routing strategy "hot_experts") use these same weights, so a kernel-level and an end-to-end row describe one
routing.
Standard library only: the served engine's plugin imports it too.
"""

from __future__ import annotations

import math
import random
from functools import cache

HOT_SHARE = 0.5  # the share of the routing mass the hot experts carry
HOT_FRACTION = 1 / 16  # hot experts per MoE layer, as a share of its experts (8 of 128), at least top-k


def hot_count(num_experts: int, top_k: int) -> int:
    """How many experts are hot: HOT_FRACTION of them, at least top_k and fewer than all of them where possible."""
    return min(max(top_k, round(num_experts * HOT_FRACTION)), max(num_experts - 1, 1))


def hot_expert_weights(num_experts: int, top_k: int) -> list[float]:
    """The sampling weight of each expert under the hot routing (they sum to 1)."""
    hot = hot_count(num_experts, top_k)
    cold = num_experts - hot
    if cold == 0:
        return [1 / num_experts] * num_experts
    return [HOT_SHARE / hot] * hot + [(1 - HOT_SHARE) / cold] * cold


def uniform_experts_touched(num_experts: int, top_k: int, tokens: int) -> float:
    """Expected distinct experts `tokens` tokens touch when each picks top_k of them uniformly, without replacement."""
    return num_experts * (1 - (1 - top_k / num_experts) ** tokens)


@cache
def hot_inclusion_probabilities(num_experts: int, top_k: int, trials: int = 20_000) -> tuple[float, ...]:
    """Per expert, the chance one token's top-k under the hot routing includes it (Gumbel top-k, seeded Monte Carlo:
    the same numbers on every machine)."""
    rng = random.Random(0)
    logs = [math.log(w) for w in hot_expert_weights(num_experts, top_k)]
    counts = [0] * num_experts
    for _ in range(trials):
        keys = [lw - math.log(-math.log(rng.random() or 1e-300)) for lw in logs]
        for i in sorted(range(num_experts), key=keys.__getitem__, reverse=True)[:top_k]:
            counts[i] += 1
    return tuple(c / trials for c in counts)


def hot_experts_touched(num_experts: int, top_k: int, tokens: int) -> float:
    """Expected distinct experts `tokens` tokens touch under the hot routing."""
    return sum(1 - (1 - p) ** tokens for p in hot_inclusion_probabilities(num_experts, top_k))
