"""kernels/tuning/search.py: the tuner's pruning, selection, budget and resume logic on a fake timer (no GPU here),
the files it writes (found by vLLM's own lookup), and the README rows tools/tune.py renders from their provenance."""

from __future__ import annotations

import math

import pytest

from kernels import config_files as cf
from kernels.shapes import KernelShape, shape_by_key
from kernels.tuning import search
from tests.vllm_moe_lookup import vllm_resolve
from tools import tune

SHAPE = shape_by_key("qwen3-30b-a3b:tp1")


def default_tile(shape: KernelShape, m: int) -> dict:
    return dict(BLOCK_SIZE_M=16 if m <= 32 else 64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=128, GROUP_SIZE_M=1, num_warps=4,
                num_stages=4)  # fmt: skip


@pytest.mark.parametrize("m", [1, 8, 64, 256, 4096], ids=lambda m: f"M={m}")
def test_candidates_are_valid_start_with_the_incumbent_and_respect_the_limit(m):
    inc = default_tile(SHAPE, m)
    tiles = search.candidate_tiles(SHAPE, m, inc)
    assert tiles[0] == inc
    assert len(tiles) <= (40 if m <= 256 else 16)
    assert len({search.tile_id(t) for t in tiles}) == len(tiles)
    assert all(cf.tile_problems(t) == [] for t in tiles[1:])


def test_decode_candidates_include_swap_ab_tiles_and_no_wasted_block_m():
    tiles = search.candidate_tiles(SHAPE, 1, default_tile(SHAPE, 1))
    # M=1, topk=8 of 128 experts: one row per expert, so BLOCK_SIZE_M > 16 only pads
    assert {t["BLOCK_SIZE_M"] for t in tiles} == {16}
    swap = [t for t in tiles if cf.swap_ab_engaged(t)]
    assert {t["BLOCK_SIZE_N"] for t in swap} >= {64, 128, 256}
    assert any(t["BLOCK_SIZE_N"] == 32 for t in tiles)  # non-swap narrow N, as in vLLM's own H200 files


def test_prefill_candidates_drop_tiny_block_m():
    tiles = search.candidate_tiles(SHAPE, 4096, default_tile(SHAPE, 4096))
    assert min(t["BLOCK_SIZE_M"] for t in tiles[1:]) >= 64  # 256 rows per expert


def test_block_fp8_candidates_keep_k_inside_the_quant_block():
    ds = shape_by_key("deepseek-v3:tp8")
    tiles = search.candidate_tiles(ds, 8, default_tile(ds, 8))
    assert all(t["BLOCK_SIZE_K"] == 128 and t["BLOCK_SIZE_N"] in (64, 128) for t in tiles[1:])


def fake_cost(shape: KernelShape, m: int, tile: dict, batches: int) -> float:
    """A smooth synthetic cost with one clear optimum (BLOCK_N=128, stages=4, swap at small M)."""
    c = 10.0 + abs(math.log2(tile["BLOCK_SIZE_N"] / 128)) * 3 + abs(tile["num_stages"] - 4) * 1.5
    c += 2.0 * (tile["BLOCK_SIZE_K"] == 256) + 0.5 * (tile["num_warps"] == 8)
    return c * (1 + m / 64) * (0.9 if cf.swap_ab_engaged(tile) and m <= 64 else 1.0)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def make_tuner(state: search.TuneState, deadline: float = 1e9, clock: Clock | None = None, cost=fake_cost):
    calls = []
    clock = clock or Clock()

    def measure(shape, m, tile, batches):
        calls.append((m, search.tile_id(tile)))
        clock.t += 1.0
        return cost(shape, m, tile, batches)

    return search.Tuner(measure, state, deadline, default_tile, clock=clock, log=lambda s: None), calls


def test_tuner_finds_the_optimum_and_writes_a_file_vllm_reads(tmp_path, vllm_lookup, monkeypatch):
    tuner, _ = make_tuner(search.TuneState.load(tmp_path / "s.jsonl"))
    finals = tuner.tune_shape(SHAPE, [1, 64])
    assert finals[1]["tile"]["BLOCK_SIZE_N"] == 128 and finals[1]["tile"]["num_stages"] == 4
    assert finals[1]["speedup"] > 1.0
    path = search.write_shape(SHAPE, finals, default_tile, tmp_path, {"triton": "3.6.0", "vllm": "x"}, "cmd")
    _, table = vllm_resolve(vllm_lookup, tmp_path, monkeypatch, SHAPE)
    assert table[1] == finals[1]["tile"]
    assert table[4096] == default_tile(SHAPE, 4096)  # untuned M keep the incumbent
    prov = cf.load_provenance(tmp_path / "provenance.json")[path.name]
    assert prov["tuned_m"] == [1, 64] and prov["triton_version"] == "3.6.0"


def test_incumbent_kept_when_challenger_is_within_noise_margin():
    assert search.pick_winner({"inc": 10.1, "new": 10.0}, "inc", margin=0.02) == "inc"
    assert search.pick_winner({"inc": 10.5, "new": 10.0}, "inc", margin=0.02) == "new"


def test_resume_skips_every_measurement_already_in_the_state_file(tmp_path):
    state_path = tmp_path / "s.jsonl"
    tuner, calls = make_tuner(search.TuneState.load(state_path))
    first = tuner.tune_shape(SHAPE, [1, 8])
    assert calls
    tuner2, calls2 = make_tuner(search.TuneState.load(state_path))
    assert tuner2.tune_shape(SHAPE, [1, 8]) == first
    assert calls2 == []


def test_interrupted_screen_resumes_where_it_stopped(tmp_path):
    state_path = tmp_path / "s.jsonl"
    clock = Clock()
    tuner, calls = make_tuner(search.TuneState.load(state_path), deadline=5.0, clock=clock)
    assert tuner.tune_m(SHAPE, 1) is None  # budget hit mid-screen: nothing final
    assert len(calls) == 5
    with state_path.open("a") as f:
        f.write('{"kind": "screen", "shape": "cut-by-kill"')  # torn last line from a kill
    tuner2, calls2 = make_tuner(search.TuneState.load(state_path))
    rec = tuner2.tune_m(SHAPE, 1)
    assert rec is not None
    screened_again = {tid for _, tid in calls2[: len(calls2)]} & {tid for _, tid in calls}
    finalists = {tid for _, tid in calls2[-(tuner2.rounds * (tuner2.top + 1)) :]}
    assert screened_again <= finalists  # the 5 done tiles were only re-timed as finalists, never re-screened


def test_budget_stops_the_shape_loop_and_keeps_finished_m(tmp_path):
    clock = Clock()
    tuner, _ = make_tuner(search.TuneState.load(None), deadline=100.0, clock=clock)
    finals = tuner.tune_shape(SHAPE, list(search.M_ORDER))
    assert 0 < len(finals) < len(search.M_ORDER)
    assert list(finals) == list(search.M_ORDER[: len(finals)])


def test_a_tile_that_fails_to_compile_loses_instead_of_aborting(tmp_path):
    def cost(shape, m, tile, batches):
        if tile["num_stages"] == 5:
            raise RuntimeError("out of resource: shared memory")
        return fake_cost(shape, m, tile, batches)

    tuner, _ = make_tuner(search.TuneState.load(None), cost=cost)
    rec = tuner.tune_m(SHAPE, 1)
    assert rec["tile"]["num_stages"] != 5


def test_readme_row_says_how_the_file_was_produced(tmp_path):
    tuner, _ = make_tuner(search.TuneState.load(None))
    finals = tuner.tune_shape(SHAPE, [1])
    versions = {"triton": "3.6.0", "vllm": "0.26.0", "gpu": "NVIDIA H200"}
    path = search.write_shape(SHAPE, finals, default_tile, tmp_path, versions, "python -m tools.tune --shapes x")
    text = tune.render_readme(cf.load_provenance(tmp_path / "provenance.json"))
    row = next(line for line in text.splitlines() if path.name in line)
    for part in ("qwen3-30b-a3b:tp1", "NVIDIA H200", "0.26.0", "3.6.0", "python -m tools.tune --shapes x", "(1)"):
        assert part in row
