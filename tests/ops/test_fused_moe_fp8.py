"""Our FP8 fused MoE against the float64 reference, routing invariants, validation and heuristics.

Without a GPU the small cases run under Triton's interpreter (conftest.py): the interpreter runs
float8_e4m3fn dots; its fp8 downcast is fixed by tests/ops/interpreter_fix.py. Real model shapes
run with `make test-gpu` (marker gpu).
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch
import triton
import triton.language as tl

from kernel_checks.problems import fused_moe_problem
from kernel_checks.reference import MOE_TOLERANCE, fused_moe_reference, rel_err
from ops import fused_moe_fp8 as F
from ops.fused_moe_fp8 import MoEKernelConfig, candidate_configs, default_config, fused_moe_fp8
from ops.moe_routing import expert_pair_list, routing_histogram, use_pair_mode
from tests.ops.conftest import DEVICE

# Inputs made where the kernels run (GBs for the GPU's real model shapes).
make_problem = functools.partial(fused_moe_problem, device=DEVICE)


def check(args, kw, config=None):
    x = args[0]
    out = torch.full_like(x, float("nan"))  # poisoned: every element must be written
    fused_moe_fp8(*args, **kw, out=out, config=config)
    ref = fused_moe_reference(*args, **kw)
    err = rel_err(out, ref)
    assert err < MOE_TOLERANCE[x.dtype], f"rel err {err:.3g} ≥ {MOE_TOLERANCE[x.dtype]} ({x.dtype})"


PAIR = MoEKernelConfig(pair_mode=True, block_n1=16, block_n2=16, split_k=2)
SCAN = MoEKernelConfig(pair_mode=False, block_n1=16, block_n2=16, split_k=2)
# no K split anywhere: GEMM1 writes the activation from registers; top-1 GEMM2 writes out directly
PAIR_NOSPLIT = MoEKernelConfig(pair_mode=True, block_n1=16, block_n2=16, split_k=1, split_k2=1)
# both fix-ups: GEMM1 over 3 splits, GEMM2 over 2 K splits × k slots per output tile
PAIR_DEEP = MoEKernelConfig(pair_mode=True, block_n1=32, block_n2=32, block_k=64, split_k=3, split_k2=2)
SCAN_NOSPLIT = MoEKernelConfig(pair_mode=False, block_n1=32, block_n2=16, block_k=64, split_k=1)

# (T, E, k, H, I, scales, static, dtype, gated, config) — small enough for the interpreter
CPU_CASES = [
    pytest.param(2, 8, 2, 160, 48, "tensor", False, torch.bfloat16, True, PAIR, id="pair-tensor-dyn-H160-odd"),
    pytest.param(3, 8, 2, 160, 48, "channel", True, torch.float16, True, SCAN, id="scan-channel-static-fp16"),
    pytest.param(3, 8, 3, 200, 96, "block", False, torch.bfloat16, True, SCAN, id="scan-block128-H200-I96"),
    pytest.param(2, 8, 1, 256, 128, "block", True, torch.float32, True, PAIR, id="pair-block-static-top1-fp32"),
    pytest.param(3, 8, 2, 96, 48, "tensor", False, torch.bfloat16, False, PAIR, id="pair-relu2-nongated"),
    pytest.param(3, 256, 8, 64, 32, "tensor", True, torch.bfloat16, True, SCAN, id="scan-E256-top8-mostly-empty"),
    pytest.param(2, 8, 3, 200, 80, "tensor", False, torch.bfloat16, True, PAIR_DEEP, id="pair-fixups-tensor-dyn"),
    pytest.param(2, 8, 2, 200, 80, "channel", False, torch.float16, True, PAIR_DEEP, id="pair-fixups-channel-dyn"),
    pytest.param(2, 8, 2, 200, 80, "channel", True, torch.bfloat16, True, PAIR_DEEP, id="pair-fixups-channel-st"),
    pytest.param(1, 8, 4, 200, 80, "tensor", False, torch.bfloat16, False, PAIR_DEEP, id="pair-fixups-relu2"),
    pytest.param(2, 8, 1, 200, 80, "tensor", False, torch.bfloat16, True, PAIR_NOSPLIT, id="pair-nosplit-top1"),
    pytest.param(2, 8, 2, 144, 48, "tensor", False, torch.bfloat16, False, PAIR_NOSPLIT, id="pair-nosplit-relu2"),
    pytest.param(3, 8, 2, 200, 80, "channel", False, torch.bfloat16, True, SCAN_NOSPLIT, id="scan-nosplit-dyn"),
    pytest.param(2, 8, 2, 300, 160, "block", False, torch.bfloat16, True,
                 MoEKernelConfig(pair_mode=True, block_n1=16, block_n2=16, split_k=3, split_k2=2),
                 id="pair-fixups-block-dyn-H300"),
    pytest.param(2, 8, 2, 300, 160, "block", True, torch.bfloat16, False,
                 MoEKernelConfig(pair_mode=True, block_n1=32, block_n2=16, split_k=2, split_k2=2),
                 id="pair-fixups-block-static-relu2"),
]  # fmt: skip


@pytest.mark.parametrize("t,e,k,h,inter,scales,static,dtype,gated,config", CPU_CASES)
def test_matches_float64_reference(t, e, k, h, inter, scales, static, dtype, gated, config):
    args, kw = make_problem(t, e, k, h, inter, scales=scales, static=static, dtype=dtype, gated=gated)
    check(args, kw, config)


@pytest.mark.parametrize("k", [1, 2, 5, 8])
def test_top_k_1_to_8_both_fixups(k):
    args, kw = make_problem(2, 16, k, 144, 48, scales="tensor", seed=k)
    check(args, kw, MoEKernelConfig(pair_mode=True, block_n1=16, block_n2=32, block_k=64, split_k=2, split_k2=2))


@pytest.mark.parametrize("config", [PAIR_DEEP, PAIR_NOSPLIT, SCAN, SCAN_NOSPLIT], ids=lambda c: c.label())
def test_a_negative_expert_id_adds_nothing_whatever_its_weight(config):
    """vLLM's padding rows (and, under expert parallelism, another rank's experts) come as id -1 with a weight that
    may be anything: the kernel adds nothing for them, so the plugin launches no masking kernels. Poisoned scratch
    shows a pair that reads what nobody wrote; a whole token of -1 must come out as exact zeros. The 8 experts are
    a view of 9 from the second on: an id of -1 read as an index finds a real expert's weights and scales there."""
    args, kw = make_problem(3, 9, 2, 200, 80, scales="tensor", seed=11)
    hidden, w13, w2, weights, ids = args
    w13, w2 = w13[1:], w2[1:]
    kw = {**kw, "w13_scale": kw["w13_scale"][1:], "w2_scale": kw["w2_scale"][1:]}
    ids = torch.remainder(ids, 8)
    ids[1] = -1  # a padding row: every slot
    ids[2, 0] = -1  # one slot of a real row
    expected = fused_moe_reference(hidden, w13, w2, torch.where(ids < 0, 0.0, weights), ids.clamp_min(0), **kw)
    out = torch.full_like(hidden, float("nan"))
    fused_moe_fp8(hidden, w13, w2, weights, ids, **kw, out=out, config=config)
    assert rel_err(out, expected) < MOE_TOLERANCE[hidden.dtype]
    assert torch.equal(out[1], torch.zeros_like(out[1]))


@pytest.mark.parametrize(
    "config", [PAIR_DEEP, SCAN], ids=["pair", "scan"]
)  # both modes use the GEMM1 fix-up counters; PAIR also GEMM2's
def test_counters_are_zero_after_a_call_so_a_second_call_repeats_it(config):
    """The last arriving program resets its counter: the shared buffer is all zeros after every call
    (what a CUDA-graph replay relies on) and the same call gives bit-identical output again."""
    args, kw = make_problem(2, 8, 3, 200, 80, scales="channel", seed=7)
    first = fused_moe_fp8(*args, **kw, config=config)
    counters = F._COUNTERS[args[0].device]
    assert int(counters.count_nonzero()) == 0
    second = fused_moe_fp8(*args, **kw, out=torch.full_like(first, float("nan")), config=config)
    assert torch.equal(first, second)


@pytest.mark.parametrize("k", [1, 3])  # top-1 with a K split, and several slots
def test_the_atomic_sum_matches_the_float64_layer_and_leaves_its_accumulators_at_zero(k):
    """The order-dependent comparison form of PAIR mode's top-k sum (atomic_sum=True, a bench column): correct, and
    its shared fp32 accumulators are zero again after the call, as the next launch and a graph replay need."""
    import dataclasses

    config = dataclasses.replace(PAIR_DEEP, atomic_sum=True)
    args, kw = make_problem(3, 8, k, 200, 80, scales="tensor", seed=13)
    out = torch.full_like(args[0], float("nan"))
    fused_moe_fp8(*args, **kw, out=out, config=config)
    assert rel_err(out, fused_moe_reference(*args, **kw)) < MOE_TOLERANCE[args[0].dtype]
    assert int(F._ACCUMULATORS[args[0].device].count_nonzero()) == 0
    assert int(F._COUNTERS[args[0].device].count_nonzero()) == 0
    assert "/atomic" in config.label()


def _poisoned_empty(real: Any) -> Any:
    """torch.empty whose memory holds NaN (floats) or -1 (integers): what a kernel reads before writing shows."""

    def empty(*args: Any, **kwargs: Any) -> torch.Tensor:
        tensor = real(*args, **kwargs)
        return tensor.fill_(float("nan") if tensor.is_floating_point() else -1)

    return empty


def test_a_counter_left_nonzero_is_caught(monkeypatch: pytest.MonkeyPatch):
    """The control of the test above: a stale counter (what a missing reset leaves) changes the answer.

    The early finisher reduces a split slice not written yet. torch.empty's memory is whatever the allocator
    hands back, often the previous call's identical slices (the control then passed by luck or failed, about one
    run in three): so the scratch memory is poisoned, and the correct run is shown unaffected by the poison."""
    args, kw = make_problem(2, 8, 3, 200, 80, scales="channel", seed=7)
    good = fused_moe_fp8(*args, **kw, config=PAIR_DEEP)
    monkeypatch.setattr(F.torch, "empty", _poisoned_empty(torch.empty))
    assert torch.equal(good, fused_moe_fp8(*args, **kw, config=PAIR_DEEP))
    F._COUNTERS[args[0].device][0] = 1  # GEMM1 tile (pair 0, n-tile 0) now finishes one split early
    try:
        bad = fused_moe_fp8(*args, **kw, out=torch.full_like(good, float("nan")), config=PAIR_DEEP)
    finally:
        F._COUNTERS[args[0].device].zero_()
    assert not torch.equal(good, bad)


def test_counters_needed_while_capturing_a_graph_are_private_to_it(monkeypatch):
    """A buffer allocated during CUDA-graph capture is unwritten until the graph replays, so it must not
    become the shared buffer eager calls use; the captured call gets its own zeroed one and is correct."""
    args, kw = make_problem(2, 8, 3, 200, 80, scales="channel", seed=7)
    monkeypatch.setattr(F, "_COUNTERS", {})
    monkeypatch.setattr(F, "_capturing", lambda device: True)
    check(args, kw, config=PAIR_DEEP)
    assert F._COUNTERS == {}
    monkeypatch.setattr(F, "_capturing", lambda device: False)
    check(args, kw, config=PAIR_DEEP)
    assert int(F._COUNTERS[args[0].device].count_nonzero()) == 0


@pytest.mark.parametrize("block_m", [16, 32])
def test_all_tokens_on_one_expert_walks_several_row_blocks(block_m):
    # 70 tokens × top-1 on expert 3: SCAN mode loops over 5 / 3 chunks of block_m rows (the last one
    # partial); the other experts are empty
    ids = torch.full((70, 1), 3, dtype=torch.int32)
    args, kw = make_problem(70, 4, 1, 64, 32, scales="tensor", ids=ids)
    check(args, kw, MoEKernelConfig(**{**SCAN.__dict__, "block_m": block_m}))


@pytest.mark.parametrize(
    "scales,static", [("block", False), ("channel", False), ("tensor", True)], ids=["block-dyn", "channel-dyn", "st"]
)
def test_scan_mode_with_wide_row_blocks(scales, static):
    # block_m 32: dynamic per-row scales over 32-row tiles, a mix of busy and empty experts
    args, kw = make_problem(24, 8, 2, 256, 128, scales=scales, static=static, seed=5)
    check(args, kw, MoEKernelConfig(pair_mode=False, block_n1=32, block_n2=32, split_k=2, block_m=32))


def test_scan_block_m_follows_the_pairs_per_expert():
    assert F.scan_block_m(64, 128, 8) == 16  # 4 pairs per expert
    assert F.scan_block_m(256, 128, 6) == 16  # Nemotron: 12 per expert
    assert F.scan_block_m(256, 128, 8) == 32  # Qwen3: 16 per expert
    assert F.scan_block_m(256, 8, 2) == 32  # Mixtral: 64 per expert, capped
    with pytest.raises(ValueError, match="block_m must be 16 or 32"):
        check(*make_problem(2, 8, 2, 64, 32, scales="tensor"), MoEKernelConfig(pair_mode=True, block_m=32))


def test_default_config_runs_end_to_end():
    args, kw = make_problem(2, 16, 4, 128, 64, scales="channel", static=False, seed=3)
    check(args, kw, None)


@pytest.mark.parametrize("pair_mode", [True, False])
def test_default_config_sized_for_either_mode_is_valid_and_correct(pair_mode):
    # what the bench times on both sides of the PAIR/SCAN switch (bench_fused_moe's ours_pair_us / ours_scan_us)
    heuristic = default_config(4, 16, 4, 128, 64, block_k=64)
    forced = default_config(4, 16, 4, 128, 64, block_k=64, pair_mode=pair_mode)
    assert forced.pair_mode is pair_mode and (forced == heuristic) is (heuristic.pair_mode is pair_mode)
    assert forced.split_k2 == 1 or pair_mode
    args, kw = make_problem(4, 16, 4, 128, 64, scales="tensor", static=True, seed=4)
    check(args, kw, forced)


@triton.jit
def _pair_list_probe(ids_ptr, list_ptr, count_ptr, num_pairs, SCAN_BLOCK: tl.constexpr):
    e = tl.program_id(0)
    expert_pair_list(ids_ptr, list_ptr + e * num_pairs, count_ptr + e, e, num_pairs, SCAN_BLOCK)


@pytest.mark.parametrize(
    "t,e,k",
    [
        pytest.param(5, 16, 2, id="some-experts-empty"),
        pytest.param(37, 8, 3, id="pairs-not-multiple-of-scan-block"),
        pytest.param(1, 256, 8, id="E256-top8-one-token"),
    ],
)
def test_scan_lists_every_pair_exactly_once(t, e, k):
    ids = torch.rand(t, e).topk(k, dim=1).indices.to(torch.int32).reshape(-1).to(DEVICE)
    p = ids.numel()
    lists = torch.full((e, p), -1, dtype=torch.int32, device=DEVICE)
    counts = torch.full((e,), -1, dtype=torch.int32, device=DEVICE)
    _pair_list_probe[(e,)](ids, lists, counts, p, SCAN_BLOCK=16)  # small block: several scan steps
    assert counts.cpu().tolist() == routing_histogram(ids.cpu(), e).tolist()
    seen = []
    for x in range(e):
        got = lists[x, : counts[x]].cpu()
        assert (ids.cpu()[got.long()] == x).all()
        assert got.tolist() == sorted(got.tolist())  # stable order
        seen += got.tolist()
    assert sorted(seen) == list(range(p))


def test_pair_mode_only_while_pairs_hit_distinct_experts():
    assert use_pair_mode(1, 128, 8)
    assert not use_pair_mode(64, 128, 8)
    assert not use_pair_mode(8, 8, 2)  # Mixtral: 16 pairs on 8 experts


@pytest.mark.parametrize("m", [1, 4, 64, 256])
def test_default_config_fills_the_gpu(m):
    cfg = default_config(m, 256, 8, 7168, 256, block_k=128, num_sms=132)
    rows = m * 8 if cfg.pair_mode else 256
    assert rows * triton.cdiv(256, cfg.block_n1) * cfg.split_k >= 132 or cfg.split_k == 8


SHAPES_M1 = {  # (E, k, H, I) of the decode targets
    "qwen3-30b-a3b": (128, 8, 2048, 768),
    "deepseek-v3-tp8": (256, 8, 7168, 256),
    "llama4-maverick-tp8": (128, 1, 5120, 1024),
    "mixtral-8x7b": (8, 2, 4096, 14336),
    "nemotron-3-nano": (128, 6, 2688, 1856),
}


def _programs(cfg: MoEKernelConfig, m: int, e: int, k: int, h: int, inter: int) -> tuple[int, int]:
    s1 = F._splits(h, cfg.split_k, cfg.block_k)[1]
    s2 = F._splits(inter, cfg.split_k2, cfg.block_k)[1]
    rows = m * k if cfg.pair_mode else e
    return rows * triton.cdiv(inter, cfg.block_n1) * s1, rows * triton.cdiv(h, cfg.block_n2) * s2


@pytest.mark.parametrize("name", sorted(SHAPES_M1))
def test_default_config_at_m1_fills_the_sms_with_wide_tiles(name):
    e, k, h, inter = SHAPES_M1[name]
    cfg = default_config(1, e, k, h, inter, num_sms=132)
    g1, g2 = _programs(cfg, 1, e, k, h, inter)
    assert cfg.pair_mode
    # GEMM2 keeps 128-row tiles (the H200 sweep's winners) and may then stop short of 2 programs per SM, but
    # only with its K split as deep as the rules allow (Maverick: 1 pair × 40 tiles × 4 splits)
    deepest2 = min(F.MAX_SPLIT_K, max(1, triton.cdiv(inter, cfg.block_k) // 2))
    assert g1 >= 2 * 132 and (g2 >= 2 * 132 or cfg.split_k2 == deepest2), (cfg, g1, g2)
    assert cfg.block_n1 >= 64 or k == 1, cfg  # 64×128 fp8 gate + up tiles = 16 KB per K step


@pytest.mark.parametrize("m", [1, 4, 64])
def test_candidate_configs_are_valid_distinct_and_start_with_the_default(m):
    e, k, h, inter = SHAPES_M1["deepseek-v3-tp8"]
    cands = candidate_configs(m, e, k, h, inter)
    assert cands[0] == default_config(m, e, k, h, inter)
    assert len(set(cands)) == len(cands) and 6 <= len(cands) <= 16
    for c in cands:
        assert c.pair_mode == cands[0].pair_mode and 1 <= c.split_k <= F.MAX_SPLIT_K
        assert c.pair_mode or c.split_k2 == 1


def test_every_candidate_config_is_correct_on_a_small_problem():
    args, kw = make_problem(1, 16, 4, 256, 128, scales="tensor", seed=11)
    cands = candidate_configs(1, 16, 4, 256, 128, block_k=64, num_sms=4)
    assert len(cands) >= 6
    for cfg in cands:
        check(args, kw, cfg)


def test_validation_quotes_shapes():
    args, kw = make_problem(2, 4, 2, 64, 32, scales="tensor")
    x, w13, w2, w, ids = args
    with pytest.raises(ValueError, match=r"w2 must be \(E, H, I\)=\(4, 64, 32\).*\(4, 64, 16\)"):
        fused_moe_fp8(x, w13, w2[:, :, :16], w, ids, **kw)
    with pytest.raises(ValueError, match=r"w13_scale .*got \(3,\)"):
        fused_moe_fp8(*args, **{**kw, "w13_scale": kw["w13_scale"][:3]})
    with pytest.raises(ValueError, match=r"topk_weights must be float \(2, 2\)"):
        fused_moe_fp8(x, w13, w2, w[:, :1], ids, **kw)
    with pytest.raises(ValueError, match=r"activation must be one of"):
        fused_moe_fp8(*args, **{**kw, "activation": "gelu"})
    with pytest.raises(ValueError, match=r"block_shape=\[128, 128\] must have shape \(4, 1, 1\)"):
        fused_moe_fp8(*args, **{**kw, "block_shape": [128, 128]})
    with pytest.raises(ValueError, match=r"split_k2 > 1 needs pair_mode=True"):
        fused_moe_fp8(*args, **kw, config=MoEKernelConfig(pair_mode=False, split_k2=2))
    with pytest.raises(ValueError, match=r"split_k and split_k2 must be in 1\.\.16"):
        fused_moe_fp8(*args, **kw, config=MoEKernelConfig(pair_mode=True, split_k=17))


# ---- real model shapes on the H200 (make test-gpu) ------------------------------------------------
# (E, k, H, I, scales, gated): Qwen3-30B-A3B, DeepSeek-V3 TP8 (block), Mixtral-8x7B, Llama-4-Maverick
# TP8 (top-1), Nemotron-3-Nano (relu², H=2688 not a multiple of 128)
GPU_SHAPES = [
    pytest.param(128, 8, 2048, 768, "tensor", True, id="qwen3-30b-a3b"),
    pytest.param(256, 8, 7168, 256, "block", True, id="deepseek-v3-tp8"),
    pytest.param(8, 2, 4096, 14336, "channel", True, id="mixtral-8x7b"),
    pytest.param(128, 1, 5120, 1024, "tensor", True, id="llama4-maverick-tp8"),
    pytest.param(128, 6, 2688, 1856, "tensor", False, id="nemotron-3-nano"),
]


@pytest.mark.gpu
@pytest.mark.parametrize("e,k,h,inter,scales,gated", GPU_SHAPES)
@pytest.mark.parametrize("m", [1, 4, 64, 256])  # both sides of the PAIR/SCAN switch
@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_gpu_model_shapes(e, k, h, inter, scales, gated, m, static):
    args, kw = make_problem(m, e, k, h, inter, scales=scales, static=static, gated=gated, seed=m)
    check(args, kw, None)
    forced = MoEKernelConfig(pair_mode=not default_config(m, e, k, h, inter).pair_mode, split_k=2)
    check(args, kw, forced)


@pytest.mark.parametrize("scales", ["tensor", "channel"])
def test_dynamic_scale_amax_pass_over_several_blocks(monkeypatch, scales):
    """PAIR mode's 1-D amax pass loops over K in AMAX_BLOCK steps (1024: one step at test sizes);
    a 64-wide block makes it walk 4 steps of H=200 (last one partial) and 2 of I=80."""
    monkeypatch.setattr(F, "AMAX_BLOCK", 64)
    args, kw = make_problem(2, 8, 2, 200, 80, scales=scales, seed=5)
    args[0][:, 150] = 40.0  # the row maximum sits in the last, partial block
    check(args, kw, PAIR_DEEP)


@pytest.mark.parametrize(
    "name,m,pdl",
    [
        ("qwen3-30b-a3b", 1, True),  # 8 pairs × 1.6 MB of W2 = 12.6 MB
        ("deepseek-v3-tp8", 1, True),  # 14.7 MB
        ("llama4-maverick-tp8", 1, True),  # 5.2 MB
        ("llama4-maverick-tp8", 2, True),  # 10.5 MB
        ("qwen3-30b-a3b", 2, False),  # 25 MB
        ("nemotron-3-nano", 1, False),  # 30 MB
        ("mixtral-8x7b", 1, False),  # 117 MB: more than L2
    ],
)
def test_default_config_uses_pdl_only_where_the_w2_slices_fit_in_l2(name, m, pdl):
    e, k, h, inter = SHAPES_M1[name]
    assert default_config(m, e, k, h, inter).pdl is pdl
