"""kernels/shapes.py: the one (E, N) partition function and the shape table built on it."""

from __future__ import annotations

import pytest

from kernels.shapes import MODELS, KernelShape, moe_partition, shape_by_key

PARTITIONS = [
    pytest.param(128, 768, 1, False, (128, 768), id="one GPU keeps every expert whole"),
    pytest.param(128, 1536, 8, False, (128, 192), id="TP splits each expert's width"),
    pytest.param(256, 2048, 8, True, (32, 2048), id="EP splits the experts and keeps their width"),
    pytest.param(8, 14336, 2, False, (8, 7168), id="Mixtral TP2 halves the width"),
    pytest.param(8, 14336, 8, True, (1, 14336), id="Mixtral EP8 puts one expert on each GPU"),
]


@pytest.mark.parametrize("experts, intermediate, tp, expert_parallel, expected", PARTITIONS)
def test_moe_partition_splits_experts_or_their_width(experts, intermediate, tp, expert_parallel, expected):
    assert moe_partition(experts, intermediate, tp, expert_parallel) == expected


def test_the_resolver_splits_experts_with_the_one_partition():
    """The resolver has no (E, N) split of its own: its tuned-file lookup imports this one."""
    from entrypoint.resolve import tuned_configs

    assert tuned_configs.moe_partition is moe_partition


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("tp, ep", [(1, 1), (2, 1), (8, 1), (1, 8)], ids=["tp1", "tp2", "tp8", "tp1ep8"])
def test_kernel_shapes_take_e_and_n_from_moe_partition(name, tp, ep):
    model = MODELS[name]
    shape = KernelShape(model, tp=tp, ep=ep)
    ranks, expert_parallel = (ep, True) if ep > 1 else (tp, False)
    assert (shape.e, shape.n) == moe_partition(model.experts, model.expert_width, ranks, expert_parallel)


@pytest.mark.parametrize(
    "key, e, n, n1",
    [
        ("qwen3-30b-a3b:tp1", 128, 768, 1536),
        ("qwen3-235b-a22b:tp8", 128, 192, 384),
        ("deepseek-v3:tp8", 256, 256, 512),
        ("nemotron-3-nano-30b-a3b:tp1", 128, 1856, 1856),  # non-gated relu²: w13 has N rows
        ("mixtral-8x7b:tp1ep8", 1, 14336, 28672),  # EP splits experts, keeps the width
    ],
)
def test_shape_table_gives_vllm_e_and_n(key, e, n, n1):
    s = shape_by_key(key)
    assert (s.e, s.n, s.n1) == (e, n, n1)


@pytest.mark.parametrize(
    "key, fragment",
    [
        ("gpt-9:tp1", "unknown model 'gpt-9'"),
        ("qwen3-30b-a3b:pp2", "split must look like"),
        ("qwen3-30b-a3b:tp5", "tp=5 does not divide expert_width=768"),
    ],
)
def test_shape_key_errors_name_the_value(key, fragment):
    with pytest.raises(ValueError, match=fragment):
        shape_by_key(key)
