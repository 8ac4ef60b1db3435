"""benchmarks.kernels.bench_uniform_route: every layout it times routes correctly (the Triton interpreter here), and
its arguments are checked. The timings themselves need the H200 (benchmarks/device/queues/h200.txt)."""

from __future__ import annotations

import pytest

from benchmarks.kernels import bench_uniform_route as bench


@pytest.mark.parametrize("variant", [v for v, kw in bench.VARIANTS.items() if kw is not None])
def test_every_one_launch_layout_routes_to_distinct_experts(variant: str) -> None:
    torch = pytest.importorskip("torch")
    from benchmarks.e2e.uniform_route import Launch, uniform_route

    counter = torch.zeros(1, dtype=torch.int32)
    kwargs = bench.VARIANTS[variant]
    assert kwargs is not None
    weights, ids = uniform_route(counter, 20, 60, 6, torch.int32, **kwargs)
    assert ids.shape == (20, 6) and torch.all(weights == 1)
    assert all(len(set(row)) == 6 for row in ids.tolist()) and int(ids.max()) < 60
    if kwargs.get("philox", True):  # no_philox's hash keys are for timing: distinct per row, not uniform
        assert len({tuple(sorted(row)) for row in ids.tolist()}) == 20  # tokens draw apart, in any layout
    launch = Launch.of(kwargs.get("sampler", "floyd"), 60, 6, kwargs.get("tokens_per_program"))
    programs = -(-20 // launch.block_t)
    assert counter.item() == (0 if kwargs.get("bump") is False else programs)  # a seed per program
    _, again = uniform_route(counter, 20, 60, 6, torch.int32, **kwargs)
    assert torch.equal(ids, again) == (kwargs.get("bump") is False)  # without the bump every call draws alike


@pytest.mark.parametrize(
    ("text", "message"),
    [("128", "accepted: EXPERTS:TOP_K"), ("128:x", "accepted: EXPERTS:TOP_K"), ("8:9", "top_k 9 with 8 experts")],
)
def test_bad_shapes_are_refused_naming_what_is_accepted(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        bench.parse_shapes(text)


def test_the_table_has_a_column_per_variant() -> None:
    row = {"condition": "cold", "experts": 128, "top_k": 8, "M": 1}
    for i, v in enumerate(bench.VARIANTS):
        row[f"{v}_us"], row[f"{v}_spread"] = 10.0 + i, 0.01
    table = bench.markdown([row])
    assert table.splitlines()[0].count("µs (spread)") == len(bench.VARIANTS)
    assert "| cold | 128 / 8 | 1 | 10.00 (1.0 %) | 11.00 (1.0 %) |" in table
    assert table.splitlines()[1].count("---") == 3 + len(bench.VARIANTS)
