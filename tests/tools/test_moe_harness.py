"""tools.moe_harness routings: uniform ones spread over experts, shared ones put every token on the first token's."""

from __future__ import annotations

from kernels.shapes import shape_by_key
from tools import moe_harness

QWEN3 = shape_by_key("qwen3-30b-a3b:tp1")


def test_shared_routings_put_every_token_on_the_same_experts() -> None:
    uniform = moe_harness.random_routings(QWEN3, 8, 4, device="cpu")
    shared = moe_harness.random_routings(QWEN3, 8, 4, device="cpu", shared=True)
    assert moe_harness.distinct_experts(shared) == QWEN3.topk
    assert moe_harness.distinct_experts(uniform) > 3 * QWEN3.topk  # 8 tokens × top-8 of 128: ~51 expected
    for x, weights, ids in shared:
        assert ids.is_contiguous() and bool((ids == ids[:1]).all()) and x.shape == (8, QWEN3.h)
        assert weights.shape == (8, QWEN3.topk)
