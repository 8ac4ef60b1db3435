"""bench_moe_fold's rows on the CPU (Triton's interpreter, a tiny shape, a timer that runs each variant once): every
variant runs, the folded layer agrees with the kernels fed the same routing, and the derived columns follow from the
timed ones. The timings themselves only mean something on an H200 (queue h200.txt, kernels-fold)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import tests.ops.conftest  # noqa: F401 (TRITON_INTERPRET before the kernels import)
from benchmarks.kernels import bench_moe_fold as bench
from kernels.shapes import KernelShape, ModelMoE
from tests.ops.conftest import DEVICE

TINY = KernelShape(ModelMoE("tiny-moe", hidden=128, expert_width=64, experts=8, topk=2))
NEMO = KernelShape(ModelMoE("nemotron-3-nano-30b-a3b", hidden=128, expert_width=64, experts=8, topk=2, gated=False))


def test_every_variant_runs_and_the_fold_agrees_with_the_kernels() -> None:
    calls: Counter[int] = Counter()
    durations = iter(range(1, 10_000))

    def timer(run: Any, calls_per_run: int = 1, **kw: Any) -> float:
        run()
        calls[kw.get("calls", calls_per_run)] += 1
        return float(next(durations))

    rows = bench.bench_shape(TINY, (1, 2), reps=1, topk_fn=None, device=DEVICE, timer=timer)  # the interpreter is slow
    assert [r["M"] for r in rows] == [1, 2]
    for r in rows:
        assert r["folded_rel_err"] < 0.02 and r["scoring"] == "softmax"
        assert r["fold_gain"] == round(r["torch_route_us"] / r["folded_us"], 3)  # no vLLM here: torch's top-k
        assert r["prologue_us"] == round(r["folded_us"] - r["kernels_us"], 2)
        assert r["pdl_gain"] == round(r["router_folded_us"] / r["router_folded_pdl_us"], 3)
        assert r["router_gemm"] == "torch"
        assert "vllm_route_us" not in r and "block_gain" not in r and "pdl_alone_gain" not in r
    assert sum(calls.values()) == 2 * 1 * 6  # M values × reps × the six variants without vLLM


def test_with_a_fused_top_k_every_block_variant_runs_and_every_column_reaches_the_csv() -> None:
    """A top-k with vLLM's topk_softmax contract (weights, ids written in place) in torch: vLLM's CUDA op does not
    run here. Every key of a row must be a CSV column (the writer drops the others silently)."""

    def topk(weights: Any, ids: Any, logits: Any, scoring: str, renorm: bool) -> None:
        w, i = bench.torch_route(logits, ids.shape[1], scoring, renorm, None, 1.0)
        weights.copy_(w)
        ids.copy_(i)

    ran: list[str] = []

    def timer(run: Any, **kw: Any) -> float:
        run()
        ran.append(run.__name__)
        return float(len(ran))

    (row,) = bench.bench_shape(TINY, (1,), reps=1, topk_fn=topk, device=DEVICE, timer=timer)
    assert len(ran) == 9
    for gain, (num, den) in bench.GAINS.items():
        assert row[gain] == round(row[f"{num}_us"] / row[f"{den}_us"], 3)
    assert set(row) <= set(bench.COLUMNS), set(row) - set(bench.COLUMNS)
    table = bench.markdown([row])
    assert "router + folded, GEMM1 PDL µs" in table and str(row["block_gain"]) in table


@pytest.mark.parametrize("shape", [NEMO], ids=["sigmoid with a bias"])
def test_a_biased_sigmoid_router_is_benched_as_the_model_routes(shape: KernelShape) -> None:
    (row,) = bench.bench_shape(shape, (1,), reps=1, topk_fn=None, device=DEVICE, timer=lambda run, **kw: run() or 1.0)
    assert row["scoring"] == "sigmoid+bias" and row["folded_rel_err"] < 0.02


def test_a_gpu_runs_csv_plots_to_a_png_beside_it(tmp_path) -> None:
    """The GPU host may lack matplotlib: `--plot CSV` draws the committed CSV here."""
    csv_path = tmp_path / "h200_moe_fold.csv"
    cols = ["shape", "M", "scoring", "kernels_us", "kernels_spread", "folded_us", "folded_spread", "vllm_route_us"]
    rows = [["qwen3-30b-a3b:tp1", m, "softmax", 17.0 + m, 0.01, 16.0 + m, 0.02, ""] for m in (1, 2, 4)]
    csv_path.write_text("\n".join(",".join(map(str, r)) for r in [cols, *rows]) + "\n")
    assert bench.main(["--plot", str(csv_path)]) == 0
    png = csv_path.with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
