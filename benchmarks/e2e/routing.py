"""Which experts the benchmark's tokens go to: the routing every GPU row runs under, and recorded in its row.

Dummy weights (`load_format=dummy`, which every benchmark row loads) route every sequence of a batch to the same few
experts, a regime no trained model is in: at 64 concurrent requests Qwen3-30B-A3B measured a TPOT of 5.71 ms with it,
below the 6.99 ms that reading the experts uniform routing touches takes, and 11.74 ms with uniform routing. vLLM's
router has a simulator for benchmarks (`VLLM_MOE_ROUTING_SIMULATION_STRATEGY`, `fused_moe/router/
routing_simulator_router.py`): it replaces the router's top-k, before the MoE kernels, by picks of its own. The
routings a row can run under:

- `uniform_one_launch` (the default since 2026-12-06c): top-k distinct experts per token, every k-subset equally
  likely, drawn in one kernel per layer (ours, `benchmarks/e2e/uniform_route.py`). In the engine it ran 1.5 % faster
  than the model's own router at one request (Qwen3 on an H100, 2026-12-06c), where vLLM's strategy costs 0.43 ms a
  step more (2026-12-05e): so its rows carry what users pay for routing, within 1.5 %;
- `uniform_random`: vLLM's own strategy, the same distribution as top-k of uniform random scores, in 3 kernels per
  layer (16.6 % of a one-request decode step's GPU time in the 2026-12-05 profile), the one vLLM's benchmarks use;
- `hot_experts`: ours (`benchmarks/e2e/routing_plugin.py`, registered with vLLM's simulator by a lab-only plugin):
  `HOT_SHARE` of the routing mass on the first `hot_count(E, k)` experts, the rest spread over the others, sampled
  without replacement (Gumbel top-k; weights in kernels/tuning/routing_weights.py, shared with the kernel bench):
  trained routers are uneven, and this shows how much that matters;
- `dummy`: the dummy weights' own routing (the simulator off), a labelled control only, never a published figure.

`expected_experts_touched` is what a decode step must read: the experts a batch of `tokens` touches per MoE layer.
"""

from __future__ import annotations

from kernels.tuning.routing_weights import (
    HOT_SHARE,
    hot_count,
    hot_expert_weights,
    hot_experts_touched,
    uniform_experts_touched,
)

STRATEGY_ENV = "VLLM_MOE_ROUTING_SIMULATION_STRATEGY"
DEFAULT_ROUTING = "uniform_one_launch"
CONTROL_ROUTING = "dummy"
ROUTINGS: dict[str, str] = {
    "uniform_random": "vLLM's simulator: top-k of uniform random scores",
    "uniform_one_launch": "uniform as uniform_random, drawn in one kernel per layer (our simulator strategy)",
    "hot_experts": "our simulator strategy: half the routing mass on a few hot experts",
    "dummy": "the dummy weights' own router (collapsed: a control, not published)",
}
__all__ = ["HOT_SHARE", "check_routing", "expected_experts_touched", "hot_count", "hot_expert_weights", "routing_env"]


def check_routing(name: str) -> str:
    """The routing name, or ValueError naming the value and what is accepted."""
    if name not in ROUTINGS:
        raise ValueError(f"--routing: {name!r} is not a routing; accepted: {', '.join(ROUTINGS)}")
    return name


def routing_env(name: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """(variables to set, variables to unset) for an engine that runs under this routing."""
    check_routing(name)
    if name == CONTROL_ROUTING:
        return {}, (STRATEGY_ENV,)
    return {STRATEGY_ENV: name}, ()


def expected_experts_touched(routing: str, num_experts: int, top_k: int, tokens: int) -> float:
    """Expected distinct experts of one MoE layer that `tokens` tokens (each picking top_k) touch.

    `dummy` gives top_k: the least any routing touches, so a floor built on it is a floor for every routing."""
    check_routing(routing)
    if tokens < 1 or not 1 <= top_k <= num_experts:
        raise ValueError(f"tokens={tokens}, top_k={top_k}, num_experts={num_experts}: need 1 <= top_k <= experts")
    if routing == CONTROL_ROUTING:
        return float(top_k)
    if routing in ("uniform_random", "uniform_one_launch"):
        return uniform_experts_touched(num_experts, top_k, tokens)
    return hot_experts_touched(num_experts, top_k, tokens)
