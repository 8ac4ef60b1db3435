"""A vLLM general plugin of the lab only: registers the `hot_experts` and `uniform_one_launch` routings
(benchmarks/e2e/routing.py) with vLLM's routing simulator, in every process that routes tokens (vLLM loads general
plugins in the API server, the engine core and each worker). Never in the image:
`benchmarks.device.register_entry_points` names it for the GPU host's site, beside the product's own plugin.

Why a Gumbel top-k: it samples top_k distinct experts with chances proportional to their weights from one
`torch.rand` and one `torch.topk`, as vLLM's uniform strategy does, so it is captured in CUDA graphs the same way
and costs the engine the same few small kernels (a multinomial without replacement would not).
"""

from __future__ import annotations

from typing import Any

from kernels.tuning.routing_weights import hot_expert_weights

STRATEGY = "hot_experts"


def make_strategy() -> Any:
    """The strategy object (a vLLM RoutingStrategy); built lazily so importing this module needs no vLLM."""
    import torch
    from vllm.model_executor.layers.fused_moe.router.routing_simulator_router import RoutingStrategy

    class HotExperts(RoutingStrategy):
        def __init__(self) -> None:
            self._log_weights: dict[tuple[int, int, str], torch.Tensor] = {}

        def log_weights(self, num_experts: int, top_k: int, device: torch.device) -> torch.Tensor:
            # made on the first (eager) forward, the profile run, before any CUDA-graph capture
            key = (num_experts, top_k, str(device))
            if key not in self._log_weights:
                weights = torch.tensor(hot_expert_weights(num_experts, top_k), dtype=torch.float32, device=device)
                self._log_weights[key] = weights.log()
            return self._log_weights[key]

        def simulated_logits(self, router_logits: torch.Tensor, top_k: int) -> torch.Tensor:
            """Gumbel keys whose top-k is this strategy's pick: what the product's folded routing
            (entrypoint/moe_plugin/fold_routing.py) routes by under this strategy, one draw per call."""
            num_tokens, num_experts = router_logits.shape
            uniform = torch.rand(num_tokens, num_experts, device=router_logits.device).clamp_(min=1e-20)
            return self.log_weights(num_experts, top_k, router_logits.device) - torch.log(-torch.log(uniform))

        def route_tokens(
            self,
            hidden_states: torch.Tensor,
            router_logits: torch.Tensor,
            top_k: int,
            indices_type: torch.dtype | None = None,
        ) -> tuple[torch.Tensor, torch.Tensor]:
            num_tokens = hidden_states.shape[0]
            keys = self.simulated_logits(router_logits[:num_tokens], top_k)
            topk_ids = torch.topk(keys, top_k, dim=-1).indices.to(indices_type or torch.long)
            # equal weights, as vLLM's uniform strategy gives: the rows compare routings, not mixing weights
            topk_weights = torch.ones(num_tokens, top_k, dtype=torch.float32, device=hidden_states.device)
            return topk_weights, topk_ids

    return HotExperts()


def register() -> None:
    """vLLM's entry point (group vllm.general_plugins): idempotent, as vLLM may call it more than once."""
    from vllm.model_executor.layers.fused_moe.router.routing_simulator_router import RoutingSimulator

    from benchmarks.e2e import uniform_route

    available = RoutingSimulator.get_available_strategies()
    if STRATEGY not in available:
        RoutingSimulator.register_strategy(STRATEGY, make_strategy())
    if uniform_route.STRATEGY not in available:
        RoutingSimulator.register_strategy(uniform_route.STRATEGY, uniform_route.make_strategy())
