"""The router's top-k folded into our MoE kernels (issue 33): routing invariants and outputs against float64.

`route_slot` must give what vLLM's fused top-k routers give (softmax or sigmoid scores, an optional selection-only
bias, ties to the lower expert id, renormalised weights, padding rows as -1), and the folded kernels must compute
the same layer as the unfolded kernels fed that routing. Runs on the GPU when there is one, else the interpreter.
"""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch

from kernel_checks.problems import fused_moe_problem
from kernel_checks.reference import MOE_TOLERANCE, fused_moe_reference, rel_err
from ops.fused_moe_fp8 import MoEKernelConfig, call_config, fused_moe_fp8, fused_moe_fp8_from_logits, route
from ops.moe_routing import LogitsRouting
from tests.ops.conftest import DEVICE

make_problem = functools.partial(fused_moe_problem, device=DEVICE)

PAIR = MoEKernelConfig(pair_mode=True, block_n1=16, block_n2=16, split_k=2)
PAIR_DEEP = MoEKernelConfig(pair_mode=True, block_n1=32, block_n2=32, block_k=64, split_k=3, split_k2=2)
PAIR_NOSPLIT = MoEKernelConfig(pair_mode=True, block_n1=16, block_n2=16, split_k=1, split_k2=1)
SCAN = MoEKernelConfig(pair_mode=False, block_n1=16, block_n2=16, split_k=2)


def reference_routing(routing: LogitsRouting) -> tuple[torch.Tensor, torch.Tensor]:
    """(weights float64 (T, k), ids int64 (T, k)) in float64: slot j holds the expert of rank j."""
    logits = routing.logits.double()
    scores = logits.softmax(dim=-1) if routing.scoring == "softmax" else logits.sigmoid()
    keys = scores + routing.bias.double() if routing.bias is not None else scores
    ids = torch.sort(-keys, dim=-1, stable=True).indices[:, : routing.top_k]  # stable: ties to the lower id
    weights = scores.gather(1, ids)
    if routing.renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    weights = weights * routing.scale
    if routing.is_padding is not None:
        pad = routing.is_padding[: logits.shape[0]].bool()
        ids, weights = ids.masked_fill(pad[:, None], -1), weights.masked_fill(pad[:, None], 0.0)
    return weights, ids


def kernel_routing(routing: LogitsRouting) -> tuple[torch.Tensor, torch.Tensor]:
    """ops.fused_moe_fp8.route's (weights, ids) into poisoned buffers: the same route_slot the GEMMs inline."""
    t = routing.logits.shape[0]
    ids = torch.full((t, routing.top_k), -7, dtype=torch.int32, device=routing.logits.device)
    weights = torch.full((t, routing.top_k), float("nan"), dtype=torch.float32, device=routing.logits.device)
    route(routing, weights, ids)
    return weights, ids


def _logits(t: int, e: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    return (torch.randn(t, e, generator=g, device=DEVICE) * 2).to(dtype)


ROUTINGS = [  # (T, E, k, scoring, renormalize, bias, scale, logits dtype)
    pytest.param(3, 8, 2, "softmax", True, False, 1.0, torch.float32, id="mixtral-like"),
    pytest.param(2, 128, 8, "softmax", True, False, 1.0, torch.bfloat16, id="qwen3-like-bf16-logits"),
    pytest.param(2, 60, 4, "softmax", False, False, 1.0, torch.float32, id="E60-not-a-power-of-2-no-renorm"),
    pytest.param(2, 128, 6, "sigmoid", True, True, 2.5, torch.float32, id="nemotron-like-sigmoid-bias-scaled"),
    pytest.param(2, 16, 1, "sigmoid", False, False, 1.0, torch.float32, id="top1-sigmoid"),
]


@pytest.mark.parametrize("t,e,k,scoring,renorm,bias,scale,dtype", ROUTINGS)
def test_route_slot_matches_the_float64_router(t, e, k, scoring, renorm, bias, scale, dtype):
    g = torch.Generator(device=DEVICE).manual_seed(e + k)
    routing = LogitsRouting(
        _logits(t, e, seed=k, dtype=dtype), k, scoring, renorm,
        bias=torch.randn(e, generator=g, device=DEVICE) * 0.1 if bias else None, scale=scale,
    )  # fmt: skip
    weights, ids = kernel_routing(routing)
    ref_w, ref_ids = reference_routing(routing)
    assert torch.equal(ids.long(), ref_ids)  # the same experts, slot by slot
    torch.testing.assert_close(weights.double(), ref_w, rtol=1e-5, atol=1e-7)
    assert all(len(set(row)) == k for row in ids.tolist())  # k distinct experts per token
    if renorm:
        torch.testing.assert_close(weights.double().sum(dim=1), torch.full((t,), scale, dtype=torch.float64))


def test_ties_go_to_the_lower_expert_id_as_vllms_topk_softmax():
    logits = torch.zeros(2, 16, device=DEVICE)
    logits[1, [3, 9, 12]] = 1.0  # three equal winners, then thirteen equal others
    weights, ids = kernel_routing(LogitsRouting(logits, 4))
    assert ids.tolist() == [[0, 1, 2, 3], [3, 9, 12, 0]]
    torch.testing.assert_close(weights[0], torch.full((4,), 0.25, device=DEVICE))


def test_padding_rows_get_no_expert_and_weight_zero():
    pad = torch.tensor([False, True, False, True], device=DEVICE)
    weights, ids = kernel_routing(LogitsRouting(_logits(3, 32, seed=3), 4, is_padding=pad))
    assert (ids[1] == -1).all() and (weights[1] == 0).all()
    assert (ids[[0, 2]] >= 0).all()


@pytest.mark.parametrize("config", [PAIR, PAIR_DEEP, PAIR_NOSPLIT, SCAN], ids=lambda c: c.label())
@pytest.mark.parametrize("scoring", ["softmax", "sigmoid"])
def test_the_folded_layer_equals_the_layer_fed_the_reference_routing(config, scoring):
    """Output against float64 with the float64 router's choice; the routing the kernels return is that choice."""
    args, kw = make_problem(3, 16, 3, 200, 80, scales="tensor", seed=5)
    hidden, w13, w2, _, _ = args
    pad = torch.tensor([False, False, True], device=DEVICE)
    routing = LogitsRouting(_logits(3, 16, seed=9), 3, scoring, renormalize=True, is_padding=pad)
    ref_w, ref_ids = reference_routing(routing)
    out = torch.full_like(hidden, float("nan"))
    _, weights, ids = fused_moe_fp8_from_logits(hidden, w13, w2, routing, **kw, out=out, config=config)
    assert torch.equal(ids.long(), ref_ids)
    torch.testing.assert_close(weights.double(), ref_w, rtol=1e-5, atol=1e-7)
    expected = fused_moe_reference(hidden, w13, w2, ref_w.clamp_min(0), ref_ids.clamp_min(0), **kw)
    expected[2] = 0.0  # the padding token: nothing added
    assert rel_err(out, expected) < MOE_TOLERANCE[hidden.dtype]
    assert torch.equal(out[2], torch.zeros_like(out[2]))


def test_folded_and_unfolded_kernels_agree_bit_for_bit():
    """Routing inside the GEMMs changes where the ids come from, not the arithmetic: the same bits come out."""
    args, kw = make_problem(2, 32, 4, 200, 80, scales="channel", seed=2)
    hidden, w13, w2, _, _ = args
    routing = LogitsRouting(_logits(2, 32, seed=4), 4)
    folded, weights, ids = fused_moe_fp8_from_logits(hidden, w13, w2, routing, **kw, config=PAIR_DEEP)
    unfolded = fused_moe_fp8(hidden, w13, w2, weights.clone(), ids.clone(), **kw, config=PAIR_DEEP)
    assert torch.equal(folded, unfolded)


def test_bad_routing_is_refused_naming_the_field():
    args, kw = make_problem(2, 8, 2, 64, 32, scales="tensor")
    hidden, w13, w2, _, _ = args
    cases = [
        (LogitsRouting(_logits(2, 7, seed=0), 2), "router_logits must be float (T=2, E=8)"),
        (LogitsRouting(_logits(2, 8, seed=0), 2, scoring="relu"), "scoring must be one of"),
        (LogitsRouting(_logits(2, 8, seed=0), 9), "top_k must be in 1..E=8, got 9"),
        (LogitsRouting(_logits(2, 8, seed=0), 2, bias=torch.zeros(8, dtype=torch.float64)), "bias must be (E,)"),
        (LogitsRouting(_logits(2, 8, seed=0), 2, is_padding=torch.zeros(1, dtype=torch.bool)), "is_padding must be"),
    ]
    for routing, message in cases:
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            fused_moe_fp8_from_logits(hidden, w13, w2, routing, **kw)
    ids64 = torch.zeros(2, 2, dtype=torch.int64)
    with pytest.raises(ValueError, match="topk_ids is written when routing from logits"):
        fused_moe_fp8(hidden, w13, w2, torch.zeros(2, 2), ids64, **kw, routing=LogitsRouting(_logits(2, 8, 0), 2))


GPU_SHAPES = {  # (E, k, H, I, gated, scoring, bias, scale): Qwen3-30B-A3B, Nemotron-3-Nano (its sigmoid router)
    "qwen3-30b-a3b": (128, 8, 2048, 768, True, "softmax", False, 1.0),
    "nemotron-3-nano": (128, 6, 2688, 1856, False, "sigmoid", True, 2.5),
}


def _gpu_case(name: str, m: int, seed: int = 0):
    e, k, h, inter, gated, scoring, bias, scale = GPU_SHAPES[name]
    args, kw = make_problem(m, e, k, h, inter, scales="tensor", static=True, gated=gated, seed=seed)
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    routing = LogitsRouting(
        _logits(m, e, seed=seed + 1, dtype=torch.bfloat16), k, scoring,
        bias=torch.randn(e, generator=g, device=DEVICE) * 0.1 if bias else None, scale=scale,
    )  # fmt: skip
    return args[:3], {**kw, "activation": "silu" if gated else "relu2"}, routing


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 4, 64])  # PAIR mode (routing inside the GEMMs) and SCAN mode (a routing launch)
@pytest.mark.parametrize("name", sorted(GPU_SHAPES))
def test_gpu_folded_model_shapes(name, m):
    (hidden, w13, w2), kw, routing = _gpu_case(name, m)
    out, weights, ids = fused_moe_fp8_from_logits(hidden, w13, w2, routing, **kw)
    ref_w, ref_ids = reference_routing(routing)
    assert torch.equal(ids.long(), ref_ids)
    torch.testing.assert_close(weights.double(), ref_w, rtol=1e-5, atol=1e-6)
    expected = fused_moe_reference(hidden, w13, w2, ref_w, ref_ids, **kw)
    assert rel_err(out, expected) < MOE_TOLERANCE[hidden.dtype]


@pytest.mark.gpu
def test_gpu_folded_kernels_replay_in_a_cuda_graph():
    """Captured once, replayed on new logits written in place (as vLLM replays a decode step): the graph routes
    the new logits, and gives what an eager call gives on them."""
    (hidden, w13, w2), kw, routing = _gpu_case("qwen3-30b-a3b", 1)
    out = torch.empty_like(hidden)
    fused_moe_fp8_from_logits(hidden, w13, w2, routing, **kw, out=out)  # compiles outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _, weights, ids = fused_moe_fp8_from_logits(hidden, w13, w2, routing, **kw, out=out)
    for seed in (3, 4):
        routing.logits.copy_(_logits(1, 128, seed=seed, dtype=torch.bfloat16))
        graph.replay()
        eager, eager_w, eager_ids = fused_moe_fp8_from_logits(hidden, w13, w2, routing, **kw)
        assert torch.equal(ids, eager_ids) and torch.equal(weights, eager_w)
        assert torch.equal(out, eager)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(GPU_SHAPES))
def test_gpu_gemm1_under_pdl_behind_the_router_gemm_replays_as_the_eager_block(name):
    """The MoE block after the norm as the plan_fold_pdl row runs it at M = 1: the router GEMM, then the folded
    kernels with GEMM1 launched under PDL behind it (pdl_gemm1), captured in a CUDA graph. Replayed on new hidden
    states written in place, it gives bit for bit what the eager block without PDL gives on them."""
    (hidden, w13, w2), kw, routing = _gpu_case(name, 1)
    g = torch.Generator(device=DEVICE).manual_seed(11)
    h = hidden.shape[1]
    gate = (torch.randn(w13.shape[0], h, generator=g, device=DEVICE) * h**-0.5).to(hidden.dtype)
    pdl1 = dataclasses.replace(call_config(hidden, w2, routing.top_k), pdl_gemm1=True)

    def block(config: MoEKernelConfig | None, out: torch.Tensor | None = None) -> torch.Tensor:
        logits = hidden @ gate.t()
        r = LogitsRouting(logits, routing.top_k, routing.scoring, bias=routing.bias, scale=routing.scale)
        return fused_moe_fp8_from_logits(hidden, w13, w2, r, **kw, config=config, out=out)[0]

    out = torch.empty_like(hidden)
    block(pdl1, out)  # compiles outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        block(pdl1, out)
    for _ in range(2):
        hidden.copy_(torch.randn(hidden.shape, generator=g, device=DEVICE).to(hidden.dtype))
        graph.replay()
        assert torch.equal(out, block(None))
