"""The router's top-k folded into our kernel (entrypoint/moe_plugin/fold_routing.py) through vLLM 0.32's real
runner method, router, modular kernel (prepare → patched TritonExperts.apply → finalize) and routing simulator, on
the CPU (or the GPU).

Router calls are counted (FusedTopKRouter._compute_routing, spied on; vLLM's CPU wheel has no `topk_softmax`
kernel, so the spy routes in torch). The runner itself is a MoERunner built without its __init__ (which needs a model
config) and given what `_apply_quant_method` reads: the router, the config and `routed_experts`, whose
`forward_modular` does what vLLM's Fp8MoEMethod.apply does (quantization/fp8.py: `moe_kernel.apply(x, w13, w2,
topk_weights, topk_ids, ...)`).
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from entrypoint.moe_plugin import fold_routing
from kernel_checks.reference import MOE_TOLERANCE, fused_moe_reference, rel_err
from tests.entrypoint.moe_plugin.test_plugin import SHAPE, _patched
from tests.entrypoint.moe_plugin.vllm_experts import ExpertsCase, triton_experts

LOG = logging.getLogger("test.fold_routing")
# Nemotron-3-Nano's router arguments (models/nemotron_h.py: n_group 1, topk_group 1, sigmoid, bias, scale 2.5)
NEMOTRON_ROUTER = dict(
    use_grouped_topk=True, num_expert_group=1, topk_group=1, scoring_func="sigmoid", routed_scaling_factor=2.5,
    e_score_correction_bias=torch.linspace(-0.1, 0.1, SHAPE["e"]),
)  # fmt: skip


class RoutedExperts:
    """What the runner reads of vLLM's RoutedExperts: its quant method's modular kernel and `forward_modular`."""

    apply_router_weight_on_input = False

    def __init__(self, case: ExpertsCase) -> None:
        from vllm.model_executor.layers.fused_moe.activation import MoEActivation
        from vllm.model_executor.layers.fused_moe.modular_kernel import FusedMoEKernel
        from vllm.model_executor.layers.fused_moe.prepare_finalize.no_dp_ep import MoEPrepareAndFinalizeNoDPEPModular

        self.case = case
        kernel = FusedMoEKernel(MoEPrepareAndFinalizeNoDPEPModular(), case.experts)
        self.quant_method = SimpleNamespace(moe_kernel=kernel, is_monolithic=False, topk_indices_dtype=None)
        self.activation = MoEActivation.SILU

    def forward_modular(self, x, topk_weights, topk_ids, shared_experts=None, shared_experts_input=None) -> Any:
        self.seen = (topk_weights, topk_ids)
        return self.quant_method.moe_kernel.apply(
            x, self.case.w13, self.case.w2, topk_weights, topk_ids, activation=self.activation,
            global_num_experts=self.case.w13.shape[0], expert_map=None, apply_router_weight_on_input=False,
            shared_experts=shared_experts, shared_experts_input=shared_experts_input,
        )  # fmt: skip


def _runner(case: ExpertsCase, router: Any) -> Any:
    from vllm.model_executor.layers.fused_moe.runner.moe_runner import MoERunner

    runner = MoERunner.__new__(MoERunner)
    torch.nn.Module.__init__(runner)
    runner.router, runner.moe_config, runner._shared_experts = router, case.experts.moe_config, None
    runner.routed_experts = RoutedExperts(case)
    return runner


@pytest.fixture
def folded() -> Any:
    """fold_routing installed on vLLM's MoERunner (and the MoE layer's router factory) for the test, then taken off."""
    from vllm.model_executor.layers.fused_moe import layer
    from vllm.model_executor.layers.fused_moe.runner.moe_runner import MoERunner

    original, factory = MoERunner._apply_quant_method, layer.create_fused_moe_router
    assert fold_routing.install(LOG)
    yield MoERunner
    MoERunner._apply_quant_method, layer.create_fused_moe_router = original, factory
    delattr(MoERunner, fold_routing.INSTALLED_MARK)


def _logits(m: int, e: int, seed: int, device: str = "cpu") -> torch.Tensor:
    return torch.randn(m, e, generator=torch.Generator().manual_seed(seed)).mul_(2).to(torch.bfloat16).to(device)


ROUTER_CLASSES = (
    ("fused_topk_router", "FusedTopKRouter"),
    ("fused_topk_bias_router", "FusedTopKBiasRouter"),
    ("grouped_topk_router", "GroupedTopKRouter"),
)


def _router_class(module: str, name: str) -> type:
    import importlib

    return getattr(importlib.import_module(f"vllm.model_executor.layers.fused_moe.router.{module}"), name)


@pytest.fixture
def router_calls(monkeypatch) -> list[int]:
    """Each routing call of vLLM's plain, biased or grouped top-k router appends its token count; the routing itself
    is done in torch (groups ignored: only the count matters where it runs)."""
    calls: list[int] = []

    def compute(self, hidden_states, router_logits, indices_type, *, input_ids=None):
        calls.append(router_logits.shape[0])
        logits = router_logits.float()
        scores = logits.softmax(dim=-1) if self.scoring_func == "softmax" else logits.sigmoid()
        bias = getattr(self, "e_score_correction_bias", None)
        ids = (scores + bias if bias is not None else scores).topk(self.top_k, dim=-1).indices
        weights = scores.gather(1, ids)
        return weights / weights.sum(dim=-1, keepdim=True), ids.to(indices_type or torch.int32)

    for module, name in ROUTER_CLASSES:
        monkeypatch.setattr(_router_class(module, name), "_compute_routing", compute)
    return calls


def _reference(
    case: ExpertsCase, logits: torch.Tensor, scoring: str = "softmax", bias: torch.Tensor | None = None,
    scale: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """(float64 output, weights, ids) of a top-k on scores (+ a selection bias), renormalised and scaled, as vLLM's
    routers compute it (grouped_topk_router.py's torch path)."""
    scores = logits.double().softmax(dim=-1) if scoring == "softmax" else logits.double().sigmoid()
    keys = scores + bias.double() if bias is not None else scores
    ids = torch.sort(-keys, dim=-1, stable=True).indices[:, : case.topk_ids.shape[1]]
    weights = scores.gather(1, ids)
    weights = weights / weights.sum(dim=-1, keepdim=True) * scale
    return fused_moe_reference(case.hidden, case.w13, case.w2, weights, ids, **case.kernel_kwargs), weights, ids


def test_a_folded_call_never_runs_the_router_and_matches_the_float64_layer(folded, router_calls, device) -> None:
    from vllm.model_executor.layers.fused_moe.router.fused_topk_router import FusedTopKRouter

    case = triton_experts(2, **SHAPE, scales="tensor-static", device=device)
    _patched(case, ((1, 2),))
    router = FusedTopKRouter(top_k=SHAPE["top_k"], global_num_experts=SHAPE["e"], renormalize=True)
    runner, logits = _runner(case, router), _logits(2, SHAPE["e"], seed=3, device=device)
    _, out = runner._apply_quant_method(hidden_states=case.hidden, router_logits=logits, shared_experts_input=None)
    expected, weights, ids = _reference(case, logits)
    assert router_calls == []
    assert rel_err(out.double(), expected) < MOE_TOLERANCE[torch.bfloat16]
    seen_weights, seen_ids = runner.routed_experts.seen  # the buffers the router handed on: written by our kernel
    assert torch.equal(seen_ids.long(), ids)
    torch.testing.assert_close(seen_weights.double(), weights)
    assert "select_experts" not in router.__dict__  # the per-call stand-in is gone after the call
    assert fold_routing.PENDING not in case.experts.__dict__


def test_a_token_count_outside_the_row_keeps_vllms_router(folded, router_calls, device) -> None:
    from vllm.model_executor.layers.fused_moe.router.fused_topk_router import FusedTopKRouter

    case = triton_experts(3, **SHAPE, scales="tensor-static", device=device)
    cls = _patched(case, ((1, 2),))  # M = 3 is vLLM's: its (recorded) kernel and its router
    router = FusedTopKRouter(top_k=SHAPE["top_k"], global_num_experts=SHAPE["e"])
    _runner(case, router)._apply_quant_method(case.hidden, _logits(3, SHAPE["e"], seed=1, device=device), None)
    assert router_calls == [3]
    assert [c["hidden_states"].shape[0] for c in cls.calls] == [3]


@pytest.mark.parametrize(
    ("strategy", "model_router", "folds"),
    [
        ("uniform_random", {}, True),
        ("normal_routing", {}, False),
        ("uniform_random", {"scoring_func": "sigmoid", "e_score_correction_bias": torch.zeros(8)}, True),
        ("uniform_random", NEMOTRON_ROUTER, True),
        ("uniform_random", {"use_grouped_topk": True, "num_expert_group": 2, "topk_group": 1}, False),
        ("uniform_random", {"custom_routing_function": lambda *a: None}, False),
    ],
    ids=[
        "uniform: folds",
        "normal_routing: simulator's picks",
        "a biased top-k (GLM-style)",
        "one group with a bias (Nemotron)",
        "grouped over some groups (DeepSeek)",
        "a custom routing function",
    ],
)
def test_the_routing_simulator_folds_only_where_the_models_own_router_would(
    folded, monkeypatch, strategy, model_router, folds, device
):
    """uniform_random: the fold takes the top-k of a uniform draw, as the simulator would (a fresh draw per call). A
    strategy the fold cannot stand in for (normal_routing), or a model whose own router is no plain top-k (the
    simulator replaces every router), keeps the simulator's picks: a benchmark never folds what users would not."""
    from vllm.model_executor.layers.fused_moe import layer
    from vllm.model_executor.layers.fused_moe.router.routing_simulator_router import (
        RoutingSimulator,
        RoutingSimulatorRouter,
    )

    monkeypatch.setenv("VLLM_MOE_ROUTING_SIMULATION_STRATEGY", strategy)
    simulated = []
    original = RoutingSimulator.simulate_routing
    monkeypatch.setattr(RoutingSimulator, "simulate_routing", lambda *a, **k: simulated.append(1) or original(*a, **k))
    case = triton_experts(2, **SHAPE, scales="tensor-static", device=device)
    cls = _patched(case, ((1, 2),))
    router = layer.create_fused_moe_router(top_k=SHAPE["top_k"], global_num_experts=SHAPE["e"], **model_router)
    assert type(router) is RoutingSimulatorRouter
    runner = _runner(case, router)
    routings = []
    for _ in range(2):
        runner._apply_quant_method(case.hidden, _logits(2, SHAPE["e"], seed=0, device=device), None)
        routings.append(runner.routed_experts.seen[1].clone())
    assert cls.calls == []  # our kernel both ways
    if folds:
        assert simulated == []  # routed inside our kernel
        assert not torch.equal(routings[0], routings[1])  # a new draw each call, not the (same) logits
        assert all(len(set(row)) == SHAPE["top_k"] for r in routings for row in r.tolist())
    else:
        assert simulated == [1, 1]  # the simulator's own picks, fed to our kernel


def test_a_runner_without_the_checked_method_keeps_vllms_router_with_one_line(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        assert not fold_routing.install(LOG, class_name="NoSuchRunner")
    assert "routing stays with vLLM's router" in caplog.text and "NoSuchRunner" in caplog.text


def test_a_router_that_records_its_picks_keeps_running(folded, router_calls, device) -> None:
    """Routed-experts capture (and EPLB) read the router's ids as it makes them: the fold stands aside."""
    from vllm.model_executor.layers.fused_moe.router.fused_topk_router import FusedTopKRouter

    case = triton_experts(2, **SHAPE, scales="tensor-static", device=device)
    _patched(case, ((1, 2),))
    router = FusedTopKRouter(top_k=SHAPE["top_k"], global_num_experts=SHAPE["e"])
    captured: list[Any] = []
    router.set_capture_fn(captured.append)
    _runner(case, router)._apply_quant_method(case.hidden, _logits(2, SHAPE["e"], seed=5, device=device), None)
    assert router_calls == [2] and len(captured) == 1


@pytest.mark.parametrize(
    ("module", "name", "kwargs"),
    [
        ("grouped_topk_router", "GroupedTopKRouter", {"num_expert_group": 1, "topk_group": 1}),
        ("fused_topk_bias_router", "FusedTopKBiasRouter", {}),
    ],
    ids=["one group (Nemotron-3-Nano)", "a biased top-k"],
)
def test_a_biased_router_whose_every_expert_is_eligible_folds(folded, router_calls, device, module, name, kwargs):
    case = triton_experts(2, **SHAPE, scales="tensor-static", device=device)
    _patched(case, ((1, 2),))
    bias = torch.linspace(-0.1, 0.1, SHAPE["e"], device=device)
    router = _router_class(module, name)(
        top_k=SHAPE["top_k"], global_num_experts=SHAPE["e"], scoring_func="sigmoid", renormalize=True,
        routed_scaling_factor=2.5, e_score_correction_bias=bias, **kwargs,
    )  # fmt: skip
    runner, logits = _runner(case, router), _logits(2, SHAPE["e"], seed=8, device=device).float()
    _, out = runner._apply_quant_method(case.hidden, logits, None)
    expected, weights, ids = _reference(case, logits, "sigmoid", bias, 2.5)
    assert router_calls == []
    assert rel_err(out.double(), expected) < MOE_TOLERANCE[torch.bfloat16]
    seen_weights, seen_ids = runner.routed_experts.seen
    assert torch.equal(seen_ids.long(), ids)
    torch.testing.assert_close(seen_weights.double(), weights)


def test_a_grouped_top_k_over_some_groups_keeps_vllms_router(folded, router_calls, device) -> None:
    from vllm.model_executor.layers.fused_moe.router.grouped_topk_router import GroupedTopKRouter

    case = triton_experts(2, **SHAPE, scales="tensor-static", device=device)
    _patched(case, ((1, 2),))
    router = GroupedTopKRouter(
        top_k=SHAPE["top_k"], global_num_experts=SHAPE["e"], num_expert_group=4, topk_group=2, scoring_func="sigmoid",
        e_score_correction_bias=torch.zeros(SHAPE["e"], device=device),
    )  # fmt: skip
    _runner(case, router)._apply_quant_method(case.hidden, _logits(2, SHAPE["e"], seed=2, device=device), None)
    assert router_calls == [2]


SIGMOID = dict(top_k=6, renormalize=True, scoring_func="sigmoid", routed_scaling_factor=2.5)
GPU_ROUTERS = [  # (module, class, kwargs, logits dtype): Qwen3-30B-A3B, Nemotron-3-Nano, a biased top-k
    ("fused_topk_router", "FusedTopKRouter", dict(top_k=8, renormalize=True), torch.bfloat16),
    ("grouped_topk_router", "GroupedTopKRouter", dict(SIGMOID, num_expert_group=1, topk_group=1), torch.float32),
    ("fused_topk_bias_router", "FusedTopKBiasRouter", SIGMOID, torch.float32),
]


@pytest.mark.gpu
@pytest.mark.parametrize(("module", "name", "kwargs", "dtype"), GPU_ROUTERS, ids=["qwen3", "nemotron", "biased"])
def test_gpu_the_fold_routes_as_vllms_own_router_does(module, name, kwargs, dtype) -> None:
    """vLLM's CUDA top-k kernels (topk_softmax, grouped_topk, topk_sigmoid) against the routing the fold builds for
    the same router: the same experts per token, the same weights per expert."""
    from ops.fused_moe_fp8 import route

    gen = torch.Generator(device="cuda").manual_seed(0)
    biased = name != "FusedTopKRouter"
    bias = torch.randn(128, device="cuda", generator=gen) * 0.1 if biased else None
    extra = {"e_score_correction_bias": bias} if biased else {}
    router = _router_class(module, name)(global_num_experts=128, **kwargs, **extra)
    logits = (torch.randn(16, 128, device="cuda", generator=gen) * 2).to(dtype)
    hidden = torch.zeros(16, 64, device="cuda", dtype=torch.bfloat16)
    vllm_weights, vllm_ids = router.select_experts(hidden, logits)
    routing = fold_routing.router_routing(router, logits, 16)
    assert routing is not None
    weights = torch.empty_like(vllm_weights, dtype=torch.float32)
    ids = torch.empty(vllm_ids.shape, dtype=torch.int32, device="cuda")
    route(routing, weights, ids)
    for t in range(16):
        ours = dict(zip(ids[t].tolist(), weights[t].tolist(), strict=True))
        theirs = dict(zip(vllm_ids[t].tolist(), vllm_weights[t].float().tolist(), strict=True))
        assert ours.keys() == theirs.keys(), f"token {t}: {sorted(ours)} vs vLLM {sorted(theirs)}"
        for e, w in theirs.items():
            assert abs(ours[e] - w) <= 1e-4 * max(1.0, abs(w)), f"token {t} expert {e}: {ours[e]} vs vLLM {w}"
