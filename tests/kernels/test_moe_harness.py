"""kernels.tuning.moe_harness routings: uniform ones spread over experts, shared ones put every token on the first
token's, hot ones lean on a few experts as kernels/tuning/routing_weights.py says."""

from __future__ import annotations

from kernels.shapes import shape_by_key
from kernels.tuning import moe_harness

QWEN3 = shape_by_key("qwen3-30b-a3b:tp1")


def test_shared_routings_put_every_token_on_the_same_experts() -> None:
    uniform = moe_harness.random_routings(QWEN3, 8, 4, device="cpu")
    shared = moe_harness.random_routings(QWEN3, 8, 4, device="cpu", routing="shared")
    assert moe_harness.distinct_experts(shared) == QWEN3.topk
    assert moe_harness.distinct_experts(uniform) > 3 * QWEN3.topk  # 8 tokens × top-8 of 128: ~51 expected
    for x, weights, ids in shared:
        assert ids.is_contiguous() and bool((ids == ids[:1]).all()) and x.shape == (8, QWEN3.h)
        assert weights.shape == (8, QWEN3.topk)


def test_hot_routings_lean_on_the_hot_experts_and_touch_fewer_than_uniform() -> None:
    import pytest

    hot = moe_harness.random_routings(QWEN3, 64, 8, device="cpu", routing="hot")
    uniform = moe_harness.random_routings(QWEN3, 64, 8, device="cpu")
    picks = [int(i) for _, _, ids in hot for i in ids.flatten()]
    assert 0.40 < sum(p < 8 for p in picks) / len(picks) < 0.48  # 8 hot experts: ~44 % of the picks (not 6 %)
    assert all(len(set(row.tolist())) == QWEN3.topk for _, _, ids in hot for row in ids)  # distinct per token
    assert moe_harness.distinct_experts(hot) < moe_harness.distinct_experts(uniform)
    assert moe_harness.expected_active_experts(QWEN3, 8, "hot") < moe_harness.expected_active_experts(QWEN3, 8)
    assert moe_harness.rotations(QWEN3, 8, "hot") >= moe_harness.rotations(QWEN3, 8)
    with pytest.raises(ValueError, match="routing='zipf'; accepted: uniform, shared, hot"):
        moe_harness.random_routings(QWEN3, 2, 1, device="cpu", routing="zipf")
