"""The router's top-k folded into our kernel (issue 33): one launch fewer per MoE layer at the token counts where
our kernel runs in PAIR mode. Opt-in (FOLD_ENV=1) until an H200 run measures it against the router's own launch.

How it reaches vLLM 0.32 (runner/moe_runner.py MoERunner._apply_quant_method, read in the 0.32.0 wheel): the runner
calls `router.select_experts(router_logits)` (vLLM's `topk_softmax`/`topk_sigmoid`, one kernel), then the modular
kernel, whose prepare step (no DP/EP) passes the top-k tensors through untouched, then our patched
`TritonExperts.apply`. For a call the fold takes, the wrapper below gives the router, for this call only, a
`select_experts` that returns two empty (M, k) buffers, and leaves the routing (a LogitsRouting on the same logits)
on the experts instance; `apply` hands it to ops.fused_moe_fp8, whose GEMMs route every pair themselves and write the
buffers. TritonExperts' finalize step reads neither (TopKWeightAndReduceNoOP). All of it runs inside vLLM's opaque
`moe_forward` custom op, so CUDA graphs capture the two kernels and torch.compile never traces this Python.

Which calls: a router that is exactly vLLM's FusedTopKRouter (softmax or sigmoid top-k), or a top-k with a
selection-only bias whose every expert is eligible (FusedTopKBiasRouter, GroupedTopKRouter with one group or all
groups chosen: Nemotron-3-Nano), none with EPLB or routed-experts capture; or vLLM's routing simulator with a strategy
whose picks are the top-k of scores the fold can be given (vLLM's `uniform_random`: uniform random scores; a strategy
object with `simulated_logits`); on a layer without expert parallelism or DP, whose TritonExperts is patched and whose
dispatch row gives this M to our kernel in PAIR mode.
Every other call runs vLLM's router unchanged.

The simulator replaces every model's router (router_factory.py returns it first), so under it a layer would fold even
where its own router (a grouped top-k over some of its groups: DeepSeek-V3) never would, and a benchmark would
measure a fold that users never get. The wrapped router factory therefore marks a simulator router
(PRODUCTION_ROUTING) when the router the model asked for is one the fold stands in for, and only marked simulator
routers fold (by the simulator's draw, softmax-renormalised, without the model's bias: the same work).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch only where vLLM runs: the planning side and the lab's harness import FOLD_ENV without it
    import torch

FOLD_ENV = "MOE_SERVING_FOLD_ROUTING"  # "1": fold (the lab's comparison rows set it; off by default, see above)
RUNNER_MODULE = "vllm.model_executor.layers.fused_moe.runner.moe_runner"
RUNNER_CLASS = "MoERunner"
RUNNER_PARAMETERS = (
    "self", "hidden_states", "router_logits", "shared_experts_input", "input_ids", "shared_experts_overlapping",
)  # fmt: skip
PENDING = "_moe_serving_pending_routing"  # on the experts instance for the one call the fold takes
ROW_OF = "_moe_serving_row_of"  # set on the patched experts class by triton_experts.patch: instance → DispatchRow
INSTALLED_MARK = "_moe_serving_fold"
FACTORY_MODULE = "vllm.model_executor.layers.fused_moe.layer"  # where the MoE layer calls create_fused_moe_router
PRODUCTION_ROUTING = "_moe_serving_production_routing"  # on a simulator router whose model's own router would fold
BIAS_F32 = "_moe_serving_bias_f32"  # on a biased router whose bias is not float32: the float32 copy the kernel reads


def router_routing(router: Any, logits: torch.Tensor, num_tokens: int) -> Any:
    """The routing (ops' LogitsRouting) that computes what `router` would, or None when the fold cannot stand in."""
    from vllm.model_executor.layers.fused_moe.router.fused_topk_router import FusedTopKRouter, _get_padding_mask
    from vllm.model_executor.layers.fused_moe.router.routing_simulator_router import RoutingSimulatorRouter

    for recorded in ("eplb_state", "capture_fn", "_routing_replay_out"):  # EPLB, routed-experts capture: vLLM's router
        if getattr(router, recorded, None) is not None:
            return None
    from entrypoint.moe_plugin.triton_experts import logits_routing  # the one door to ops (import contracts)

    pad = _get_padding_mask(num_tokens)
    if type(router) is FusedTopKRouter:
        return logits_routing(logits, router.top_k, router.scoring_func, router.renormalize, is_padding=pad)
    if type(router) is RoutingSimulatorRouter and PRODUCTION_ROUTING in router.__dict__:
        scores = simulated_scores(logits, router.top_k)
        return None if scores is None else logits_routing(scores, router.top_k, is_padding=pad)
    biased = biased_topk(router)
    if biased is not None:
        scoring, renormalize, bias, scale = biased
        return logits_routing(logits, router.top_k, scoring, renormalize, bias, scale, is_padding=pad)
    return None


def biased_topk(router: Any) -> tuple[str, bool, Any, float] | None:
    """(scoring, renormalize, float32 bias, scale) for a router that is a plain top-k on scores + a selection-only bias,
    else None: vLLM's FusedTopKBiasRouter without a hash table, image bias or fused shared experts (GLM-style), and
    its GroupedTopKRouter when every group is eligible (one group, or topk_group ≥ groups: Nemotron-3-Nano's n_group 1;
    DeepSeek-V3's 4 of 8 groups is a real grouped top-k and stays vLLM's). Both select on score + bias and weigh by
    the score alone (grouped_topk_router.py, fused_topk_bias_router.py: their torch paths spell it out), renormalise,
    then scale by routed_scaling_factor."""
    from vllm.model_executor.layers.fused_moe.router.fused_topk_bias_router import FusedTopKBiasRouter
    from vllm.model_executor.layers.fused_moe.router.grouped_topk_router import GroupedTopKRouter

    if type(router) is FusedTopKBiasRouter:
        if getattr(router, "_hash_indices_table", None) is not None or getattr(router, "bias_vl", None) is not None:
            return None
    elif type(router) is GroupedTopKRouter:
        if router.num_expert_group > 1 and router.topk_group < router.num_expert_group:
            return None
    else:
        return None
    if getattr(router, "num_fused_shared_experts", 0) or router.scoring_func not in ("softmax", "sigmoid"):
        return None
    bias = router.e_score_correction_bias
    if bias is None:
        return (router.scoring_func, router.renormalize, None, float(router.routed_scaling_factor))
    import torch

    if bias.dtype != torch.float32:  # converted once (the first, eager call), before any CUDA-graph capture
        cached = router.__dict__.get(BIAS_F32)
        if cached is None or cached.shape != bias.shape:
            cached = router.__dict__[BIAS_F32] = bias.detach().float().contiguous()
        bias = cached
    return (router.scoring_func, router.renormalize, bias, float(router.routed_scaling_factor))


def simulated_scores(logits: torch.Tensor, top_k: int) -> torch.Tensor | None:
    """Scores whose top-k the routing simulator's strategy picks from (one draw per call), or None.

    vLLM's `uniform_random` takes the top-k of uniform random scores (routing_simulator_router.py
    DistributionBasedRouting._sample_expert_ids): the same draw routes the folded kernel. Its weights are all 1; the
    fold's are the renormalised softmax of the scores (~1/k): the same work, other mixing weights."""
    import vllm.envs as envs
    from vllm.model_executor.layers.fused_moe.router.routing_simulator_router import (
        DistributionBasedRouting,
        RoutingSimulator,
    )

    strategy = RoutingSimulator._routing_strategies.get(envs.VLLM_MOE_ROUTING_SIMULATION_STRATEGY or "")
    if isinstance(strategy, DistributionBasedRouting) and strategy.distribution == "uniform":
        import torch

        return torch.rand(logits.shape, device=logits.device)
    own: Callable[[torch.Tensor, int], torch.Tensor] | None = getattr(strategy, "simulated_logits", None)
    return own(logits, top_k) if own is not None else None


def fold_for(runner: Any, hidden_states: torch.Tensor, router_logits: torch.Tensor) -> tuple[Any, Any] | None:
    """(the patched experts, the routing) when this call's routing can move into our kernel, else None."""
    import torch

    from entrypoint.moe_plugin.triton_experts import kernel_activation, pair_mode_at

    cfg = runner.moe_config
    if cfg.dp_size > 1 or cfg.moe_parallel_config.use_ep or cfg.is_sequence_parallel:
        return None
    if getattr(runner.routed_experts, "apply_router_weight_on_input", False):
        return None
    kernel = getattr(runner.routed_experts.quant_method, "moe_kernel", None)
    experts = getattr(kernel, "fused_experts", None) if kernel is not None else None
    row_of = getattr(experts, ROW_OF, None)
    row = row_of() if row_of is not None else None
    m = hidden_states.size(0)
    if row is None or not row.uses_project_kernel(m, kernel_activation(cfg.activation)):
        return None
    if hidden_states.dtype != torch.bfloat16:
        return None
    routing = router_routing(runner.router, router_logits, m) if pair_mode_at(row, m) else None
    return None if routing is None else (experts, routing)


def find_runner(module_name: str = RUNNER_MODULE, class_name: str = RUNNER_CLASS) -> tuple[type | None, str]:
    """(the runner class, "") or (None, why the fold cannot be installed)."""
    import importlib

    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        return None, f"{module_name}.{class_name} not found ({exc})"
    from entrypoint.moe_plugin.hook import signature_mismatch

    why = signature_mismatch(cls, "_apply_quant_method", RUNNER_PARAMETERS)
    return (None, why) if why else (cls, "")


def foldable_router(kwargs: dict[str, Any]) -> bool:
    """Whether create_fused_moe_router(**kwargs) builds a router the fold stands in for once the simulator is off:
    a plain top-k (FusedTopKRouter), or one with a selection bias and every group eligible (see biased_topk); no
    zero expert, custom function, hash table or fused shared experts (router_factory.py's order)."""
    if kwargs.get("zero_expert_type") is not None or kwargs.get("custom_routing_function") is not None:
        return False
    if kwargs.get("hash_indices_table") is not None or kwargs.get("num_fused_shared_experts", 0):
        return False
    if kwargs.get("use_grouped_topk"):
        groups, chosen = kwargs.get("num_expert_group") or 0, kwargs.get("topk_group") or 0
        if groups > 1 and chosen < groups:
            return False
    return kwargs.get("scoring_func", "softmax") in ("softmax", "sigmoid")


def wrap_router_factory(module_name: str = FACTORY_MODULE) -> None:
    """Mark the simulator routers the MoE layer builds with the plain top-k their model asked for (see above)."""
    import importlib

    from vllm.model_executor.layers.fused_moe.router.routing_simulator_router import RoutingSimulatorRouter

    module = importlib.import_module(module_name)
    original = module.create_fused_moe_router
    if getattr(original, INSTALLED_MARK, False):
        return

    def create_fused_moe_router(**kwargs: Any) -> Any:
        router = original(**kwargs)
        if type(router) is RoutingSimulatorRouter and foldable_router(kwargs):
            router.__dict__[PRODUCTION_ROUTING] = True
        return router

    setattr(create_fused_moe_router, INSTALLED_MARK, True)
    module.create_fused_moe_router = create_fused_moe_router


def install(logger: logging.Logger, module_name: str = RUNNER_MODULE, class_name: str = RUNNER_CLASS) -> bool:
    """Wrap the runner's _apply_quant_method (once per process); False and one line when it cannot be."""
    cls, why = find_runner(module_name, class_name)
    if cls is None:
        logger.warning("moe_kernel=project: routing stays with vLLM's router (%s)", why)
        return False
    if getattr(cls, INSTALLED_MARK, False):
        return True
    original = cls._apply_quant_method

    def _apply_quant_method(
        self: Any, hidden_states: torch.Tensor, router_logits: torch.Tensor, *args: Any, **kwargs: Any
    ) -> Any:  # the rest (shared_experts_input, input_ids, shared_experts_overlapping) passes through
        fold = fold_for(self, hidden_states, router_logits)
        if fold is None:
            return original(self, hidden_states, router_logits, *args, **kwargs)
        import torch

        experts, routing = fold
        m = hidden_states.size(0)
        weights = torch.empty((m, routing.top_k), dtype=torch.float32, device=hidden_states.device)
        ids = torch.empty((m, routing.top_k), dtype=torch.int32, device=hidden_states.device)

        def deferred_select(*_args: Any, **_kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
            return weights, ids  # written by our kernel (ops.fused_moe_fp8 routing=)

        experts.__dict__[PENDING] = routing
        self.router.__dict__["select_experts"] = deferred_select
        try:
            return original(self, hidden_states, router_logits, *args, **kwargs)
        finally:
            del self.router.__dict__["select_experts"]
            experts.__dict__.pop(PENDING, None)

    cls._apply_quant_method = _apply_quant_method
    setattr(cls, INSTALLED_MARK, True)
    wrap_router_factory()
    logger.info(
        "moe_kernel=project: %s=1: the router's top-k runs inside our kernel where it runs in PAIR mode "
        "(one launch fewer per MoE layer; docs/kernels.md, folding top-k)", FOLD_ENV,
    )  # fmt: skip
    return True
