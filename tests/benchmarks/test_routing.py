"""benchmarks/e2e/routing.py and routing_plugin.py: the expert routing every GPU row runs under, how it reaches the
engine, how the row records it, and what a batch touches under it (the HBM floor's input)."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.e2e import backends as be
from benchmarks.e2e import routing, routing_plugin, runner
from benchmarks.e2e.logparse import parse_engine_log
from benchmarks.e2e.run_args import parse_run_args
from kernels.tuning.routing_weights import hot_inclusion_probabilities


def test_an_unknown_routing_is_refused_with_what_is_accepted() -> None:
    accepted = "accepted: uniform_random, uniform_one_launch, hot_experts"
    with pytest.raises(ValueError, match=rf"--routing: 'zipf' is not a routing; {accepted}"):
        routing.check_routing("zipf")


def test_the_harness_routes_uniformly_unless_told_and_refuses_a_bad_routing(capsys: pytest.CaptureFixture) -> None:
    assert parse_run_args([]).routing == "uniform_one_launch"  # since 2026-12-06c: as cheap as the model's router
    assert parse_run_args(["--routing", "hot_experts"]).routing == "hot_experts"
    with pytest.raises(SystemExit) as exc:
        parse_run_args(["--routing", "collapsed"])
    assert exc.value.code == 2 and "--routing: 'collapsed' is not a routing" in capsys.readouterr().err


def test_the_row_routing_overrides_the_callers_environment(tmp_path: Path) -> None:
    setup = be.EngineSetup("plan", None)
    caller = {routing.STRATEGY_ENV: "normal_routing"}
    assert runner.engine_env(caller, setup, tmp_path, {}, routing="hot_experts")[routing.STRATEGY_ENV] == "hot_experts"
    assert routing.STRATEGY_ENV not in runner.engine_env(caller, setup, tmp_path, {}, routing="dummy")
    # None: the FlashInfer prewarm routes nothing and is left as the caller set it
    assert runner.engine_env(caller, setup, tmp_path, {})[routing.STRATEGY_ENV] == "normal_routing"


def test_the_engine_log_says_which_strategy_routed() -> None:
    line = "WARNING [routing_simulator_router.py:286] Simulating MoE routing using a uniform_random strategy. This"
    assert parse_engine_log(f"x\n{line}\n{line}\n").routing == "uniform_random"
    assert parse_engine_log("Using TRITON Fp8 MoE backend out of potential backends: [TRITON]").routing == ""


def test_experts_touched_grow_with_the_batch_and_less_so_when_routing_is_skewed() -> None:
    # Qwen3-30B-A3B: 128 experts, top-8. Uniform: 128 * (1 - (120/128)^64) = 125.9 at 64 sequences
    assert math.isclose(routing.expected_experts_touched("uniform_random", 128, 8, 64), 125.9, abs_tol=0.05)
    for tokens in (1, 2, 8, 64):
        assert routing.expected_experts_touched("dummy", 128, 8, tokens) == 8  # the least any routing touches
    assert math.isclose(routing.expected_experts_touched("hot_experts", 128, 8, 1), 8, rel_tol=1e-9)
    previous = 8.0
    for tokens in (2, 4, 8, 16, 32):
        hot = routing.expected_experts_touched("hot_experts", 128, 8, tokens)
        assert previous < hot < routing.expected_experts_touched("uniform_random", 128, 8, tokens)
        previous = hot
    with pytest.raises(ValueError, match="top_k=9, num_experts=8"):
        routing.expected_experts_touched("uniform_random", 8, 9, 4)


def test_the_hot_experts_carry_the_share_the_weights_give_them() -> None:
    weights = routing.hot_expert_weights(128, 8)
    assert math.isclose(sum(weights), 1.0) and weights[:8] == [routing.HOT_SHARE / 8] * 8
    assert routing.hot_count(8, 2) == 2 and routing.hot_count(128, 8) == 8 and routing.hot_count(256, 8) == 16


def test_the_plugin_registers_hot_experts_with_vllms_simulator_and_routes_as_the_floor_assumes() -> None:
    torch = pytest.importorskip("torch")  # the CPU vLLM of `make test` brings it
    from vllm.model_executor.layers.fused_moe.router.routing_simulator_router import RoutingSimulator

    routing_plugin.register()
    routing_plugin.register()  # vLLM may load general plugins more than once per process
    assert RoutingSimulator.get_available_strategies().count("hot_experts") == 1
    torch.manual_seed(0)
    tokens, experts, top_k = 4096, 128, 8
    weights, ids = RoutingSimulator.simulate_routing(
        torch.zeros(tokens, 16), torch.zeros(tokens, experts), "hot_experts", top_k, torch.int32
    )
    assert ids.shape == (tokens, top_k) and ids.dtype == torch.int32 and torch.all(weights == 1)
    assert all(len(set(row)) == top_k for row in ids.tolist())  # top-k distinct experts per token
    picks = Counter(ids.flatten().tolist())
    measured = [picks[i] / tokens for i in range(experts)]
    expected = hot_inclusion_probabilities(experts, top_k)
    # the plugin's sampler and the floor's Monte Carlo agree on each expert's chance to be picked
    assert max(abs(m - e) for m, e in zip(measured[:8], expected[:8], strict=True)) < 0.03
    assert math.isclose(sum(measured[:8]) / top_k, sum(expected[:8]) / top_k, abs_tol=0.01)


def test_the_folded_routing_under_hot_experts_picks_as_the_simulator_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """fold_routing (the product's top-k inside our kernel) routes by the strategy's own keys: their top-k follows
    the hot experts' chances, so a plan_fold row under hot_experts measures the routing the other rows run."""
    torch = pytest.importorskip("torch")
    from entrypoint.moe_plugin import fold_routing

    routing_plugin.register()
    monkeypatch.setenv(routing.STRATEGY_ENV, "hot_experts")
    torch.manual_seed(1)
    tokens, experts, top_k = 4096, 128, 8
    keys = fold_routing.simulated_scores(torch.zeros(tokens, experts), top_k)
    assert keys is not None and keys.shape == (tokens, experts)
    picks = Counter(keys.topk(top_k, dim=-1).indices.flatten().tolist())
    measured = [picks[i] / tokens for i in range(8)]
    assert (
        max(abs(m - e) for m, e in zip(measured, hot_inclusion_probabilities(experts, top_k)[:8], strict=True)) < 0.03
    )


def test_uniform_one_launch_routes_uniformly_to_distinct_experts_and_draws_afresh_each_call() -> None:
    """benchmarks/e2e/uniform_route.py (the Triton interpreter here): top_k distinct experts per token, every expert
    equally likely, weights 1, and a new draw per call from the counter in device memory (what a graph replay reads)."""
    torch = pytest.importorskip("torch")
    from benchmarks.e2e import uniform_route

    counter = torch.zeros(1, dtype=torch.int32)
    tokens, experts, top_k = 2048, 128, 8
    weights, ids = uniform_route.uniform_route(counter, tokens, experts, top_k, torch.int32)
    assert ids.shape == (tokens, top_k) and ids.dtype == torch.int32 and torch.all(weights == 1)
    assert all(len(set(row)) == top_k for row in ids.tolist())  # distinct experts per token
    assert int(ids.min()) >= 0 and int(ids.max()) < experts
    picks = Counter(ids.flatten().tolist())
    assert len(picks) == experts
    expected = tokens * top_k / experts  # 128 picks per expert; a binomial spread of ~11
    assert max(abs(n - expected) for n in picks.values()) < 6 * expected**0.5
    programs = tokens // uniform_route.TOKENS_PER_PROGRAM["floyd"]
    assert counter.item() == programs  # every program took a seed of its own
    _, again = uniform_route.uniform_route(counter, tokens, experts, top_k, torch.int32)
    assert counter.item() == 2 * programs and not torch.equal(ids, again)  # the next call (layer, replay) draws afresh
    # no program's draw repeats another's, within a launch or from one launch to the next (the seed is per program)
    blocks = [
        tuple(map(tuple, b))
        for b in (ids.view(programs, -1, top_k).tolist() + again.view(programs, -1, top_k).tolist())
    ]
    assert len(set(blocks)) == 2 * programs
    # a token's draw does not depend on its neighbours: tokens of one program get different experts
    assert len({tuple(sorted(row)) for row in ids[:16].tolist()}) == 16
    # odd shapes: experts not a power of two (never picked beyond E), a token count off the program size
    _, odd = uniform_route.uniform_route(counter, 5, 60, 6, torch.int64)
    assert odd.dtype == torch.int64 and int(odd.max()) < 60 and all(len(set(r)) == 6 for r in odd.tolist())
    with pytest.raises(ValueError, match="top_k=9 with 8 experts"):
        uniform_route.uniform_route(counter, 1, 8, 9, torch.int32)


@pytest.mark.parametrize("sampler", ["floyd", "topk"])
def test_each_sampler_draws_every_k_subset_equally_often(sampler: str) -> None:
    """Uniform per expert is not enough: Floyd's draw must make every set of k experts equally likely, as the top-k
    of uniform keys does. 6 experts, top-3: 20 subsets, 400 expected draws each (a binomial spread of ~20)."""
    torch = pytest.importorskip("torch")
    from benchmarks.e2e import uniform_route

    tokens = 8_000
    _, ids = uniform_route.uniform_route(torch.zeros(1, dtype=torch.int32), tokens, 6, 3, torch.int32, sampler=sampler)
    subsets = Counter(tuple(sorted(row)) for row in ids.tolist())
    assert len(subsets) == 20
    assert max(abs(n - tokens / 20) for n in subsets.values()) < 5 * (tokens / 20) ** 0.5


def test_an_unknown_sampler_is_refused_naming_the_accepted_ones() -> None:
    torch = pytest.importorskip("torch")
    from benchmarks.e2e import uniform_route

    with pytest.raises(ValueError, match="sampler='gumbel': accepted: floyd, topk"):
        uniform_route.uniform_route(torch.zeros(1, dtype=torch.int32), 1, 8, 2, torch.int32, sampler="gumbel")


def test_the_plugin_registers_uniform_one_launch_with_vllms_simulator() -> None:
    torch = pytest.importorskip("torch")
    from vllm.model_executor.layers.fused_moe.router.routing_simulator_router import RoutingSimulator

    routing_plugin.register()
    routing_plugin.register()
    assert RoutingSimulator.get_available_strategies().count("uniform_one_launch") == 1
    weights, ids = RoutingSimulator.simulate_routing(
        torch.zeros(64, 16), torch.zeros(64, 128), "uniform_one_launch", 8, torch.int32
    )
    assert ids.shape == (64, 8) and all(len(set(row)) == 8 for row in ids.tolist()) and torch.all(weights == 1)
    assert routing.expected_experts_touched("uniform_one_launch", 128, 8, 64) == routing.expected_experts_touched(
        "uniform_random", 128, 8, 64
    )


@pytest.mark.gpu
def test_uniform_one_launch_draws_afresh_in_every_cuda_graph_replay() -> None:
    """What the engine does with it: captured once in a CUDA graph, replayed per decode step. Each replay must read
    the live counter (a seed passed from Python would be frozen into the graph and route every step alike)."""
    torch = pytest.importorskip("torch")
    from benchmarks.e2e import uniform_route

    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    uniform_route.uniform_route(counter, 8, 128, 8, torch.int32)  # compile outside the capture, as vLLM's warm-up
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _, ids = uniform_route.uniform_route(counter, 8, 128, 8, torch.int32)
    draws = []
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        draws.append(ids.clone())
    assert all(len(set(row)) == 8 for draw in draws for row in draw.tolist())
    assert not torch.equal(draws[0], draws[1]) and not torch.equal(draws[1], draws[2])
    assert counter.item() == 1 + 3  # the eager call and three replays (a capture records, it runs nothing)


@pytest.mark.gpu
@pytest.mark.parametrize("sampler", ["floyd", "topk"])
def test_the_compiled_samplers_draw_distinct_experts_and_every_subset_alike(sampler: str) -> None:
    """The interpreter tests above check the logic; the compiled code (Philox, umulhi on the GPU) must agree."""
    torch = pytest.importorskip("torch")
    from benchmarks.e2e import uniform_route

    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    _, ids = uniform_route.uniform_route(counter, 4096, 128, 8, torch.int32, sampler=sampler)
    rows = ids.cpu().tolist()
    assert all(len(set(row)) == 8 and min(row) >= 0 and max(row) < 128 for row in rows)
    tokens = 20_000
    _, ids = uniform_route.uniform_route(counter, tokens, 6, 3, torch.int32, sampler=sampler)
    subsets = Counter(tuple(sorted(row)) for row in ids.cpu().tolist())
    assert len(subsets) == 20 and max(abs(n - tokens / 20) for n in subsets.values()) < 5 * (tokens / 20) ** 0.5
