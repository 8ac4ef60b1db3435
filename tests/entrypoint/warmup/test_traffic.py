"""entrypoint.warmup.traffic: the bake's requests stay inside the plan's limits and reach every shape class."""

from __future__ import annotations

from entrypoint.warmup import traffic as bt


def test_prompts_stay_under_the_model_length_and_batches_under_the_sequence_limit() -> None:
    plan = bt.batches("m", vocab=1000, max_model_len=300, max_num_seqs=16)
    lengths = [len(b.bodies[0]["prompt"]) for b in plan if b.label.startswith("prompt ")]
    assert lengths == [n for n in bt.PROMPT_LENGTHS if n <= 295] and max(lengths) == 257
    assert max(len(b.bodies) for b in plan) == 16
    assert all(100 <= i < 900 for b in plan for body in b.bodies for i in body["prompt"])
    assert all(body["max_tokens"] + len(body["prompt"]) <= 300 for b in plan for body in b.bodies)


def test_seeded_top_p_and_top_k_batches_of_one_eight_and_the_limit() -> None:
    plan = bt.batches("m", vocab=1000, max_model_len=4096, max_num_seqs=64)
    sampled = [b for b in plan if "sampled" in b.label]
    assert sorted({len(b.bodies) for b in sampled}) == [1, 8, 64]
    assert {tuple(sorted(k for k in ("top_p", "top_k") if k in b.bodies[0])) for b in sampled} == {
        ("top_k", "top_p"), ("top_p",), ("top_k",)}  # fmt: skip
    seeds = [body["seed"] for b in sampled for body in b.bodies]
    assert len(seeds) == len(set(seeds))  # every sampled request its own seed
    # and the greedy batches take the sizes CUDA graphs are captured at and odd ones between
    assert {len(b.bodies) for b in plan if b.label.endswith("at once")} == {2, 3, 4, 8, 16, 17, 32, 64}
