"""Tuned fused-MoE config files: vLLM's own lookup finds each shipped file, the schema is what vLLM
parses, swap-AB engages where the tile asks for it, a misnamed file is caught; the tuner's pruning,
selection, budget and resume logic on a fake timer (no GPU here)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kernels import config_files as cf
from kernels.shapes import SHIPPED, KernelShape, shape_by_key
from tools import tune

SHIPPED_FILES = cf.shipped_files()
TILE = dict(BLOCK_SIZE_M=16, BLOCK_SIZE_N=128, BLOCK_SIZE_K=128, GROUP_SIZE_M=1, num_warps=4, num_stages=4)


@pytest.fixture
def vllm_lookup(monkeypatch):
    """vLLM 0.32's real get_config_file_name/get_moe_configs, on a pretend H200 (no GPU here)."""
    from vllm.model_executor.layers.fused_moe import fused_moe

    monkeypatch.setattr(fused_moe, "get_device_name_as_file_name", lambda device_id=0: "NVIDIA_H200")
    fused_moe.get_moe_configs.cache_clear()
    yield fused_moe
    fused_moe.get_moe_configs.cache_clear()


def _vllm_resolve(fm, folder: Path, monkeypatch, shape: KernelShape):
    monkeypatch.setenv("VLLM_TUNED_CONFIG_FOLDER", str(folder))
    fm.get_moe_configs.cache_clear()
    bs = shape.block_shape or [0, 0]
    return fm.get_config_file_name(shape.e, shape.n, shape.dtype, shape.block_shape), fm.get_moe_configs(
        shape.e, shape.n, shape.dtype, bs[0], bs[1]
    )


# --- the shipped files -------------------------------------------------------------------------


@pytest.mark.parametrize("path", SHIPPED_FILES, ids=lambda p: p.name)
def test_shipped_file_resolves_through_vllm_lookup_for_the_shape_it_was_tuned_for(path, vllm_lookup, monkeypatch):
    prov = cf.load_provenance()
    assert path.name in prov, f"{path.name} has no provenance row (how was it produced?)"
    shape = shape_by_key(prov[path.name]["shape"])
    name, table = _vllm_resolve(vllm_lookup, cf.CONFIG_DIR, monkeypatch, shape)
    assert name == path.name
    assert table == cf.read_config_file(path), "vLLM loaded a different file (its own?) than ours"


@pytest.mark.parametrize("path", SHIPPED_FILES, ids=lambda p: p.name)
def test_shipped_file_schema_is_what_vllm_parses(path):
    raw = json.loads(path.read_text())
    assert set(raw) - {"triton_version"} == {str(m) for m in tune.M_GRID}
    meta = cf.parse_config_file_name(path.name)
    assert cf.validate_table(cf.parse_config_json(raw), meta["block_shape"]) == []


@pytest.mark.parametrize("path", SHIPPED_FILES, ids=lambda p: p.name)
def test_shipped_tiles_engage_swap_ab_exactly_as_vllm_decides(path, monkeypatch):
    from vllm.model_executor.layers.fused_moe import utils as moe_utils
    from vllm.platforms import current_platform

    monkeypatch.setattr(current_platform, "is_device_capability", lambda cap, device_id=0: cap == 90, raising=False)
    for m, tile in cf.read_config_file(path).items():
        moe_utils.enable_swap_ab.cache_clear()
        vllm_says = moe_utils.enable_swap_ab(tile["BLOCK_SIZE_M"], tile["BLOCK_SIZE_N"])
        assert cf.swap_ab_engaged(tile) == vllm_says, f"M={m} {tile}"
        if tile["BLOCK_SIZE_M"] < 64 and tile["BLOCK_SIZE_N"] < 64:
            # a narrow N tile at small M runs the non-swapped wgmma: only if the tuner measured it faster
            assert m in cf.load_provenance()[path.name]["tuned_m"], f"M={m}: untuned non-swap tile {tile}"


def test_every_provenance_row_has_its_file_and_every_file_is_a_shipped_shape():
    prov = cf.load_provenance()
    names = {p.name for p in SHIPPED_FILES}
    assert set(prov) == names
    expected = {cf.config_file_name(s.e, s.n, s.dtype, s.block_shape) for s in SHIPPED}
    assert names <= expected, f"files for no shipped shape: {sorted(names - expected)}"


# --- the lookup mirror, on generated files -----------------------------------------------------

SHAPE_CASES = [
    pytest.param("qwen3-30b-a3b:tp1", id="per-tensor fp8, E=128 N=768"),
    pytest.param("deepseek-v3:tp8", id="block fp8 [128,128] name carries block_shape"),
    pytest.param("mixtral-8x7b:tp2", id="E=8 N=7168 TP split of the expert width"),
]


@pytest.mark.parametrize("key", SHAPE_CASES)
def test_written_file_is_found_by_vllm_and_read_back_identically(key, tmp_path, vllm_lookup, monkeypatch):
    shape = shape_by_key(key)
    name = cf.config_file_name(shape.e, shape.n, shape.dtype, shape.block_shape)
    table = {1: TILE, 64: dict(TILE, BLOCK_SIZE_M=32), 4096: dict(TILE, BLOCK_SIZE_M=128, num_warps=8)}
    cf.write_config_file(tmp_path / name, table, "3.6.0")
    vname, got = _vllm_resolve(vllm_lookup, tmp_path, monkeypatch, shape)
    assert vname == name
    assert got == table
    for m in (1, 3, 50, 100, 3000):
        assert cf.lookup(got, m) == got[min(got, key=lambda x: abs(x - m))]


def test_misnamed_file_is_detected_and_vllm_silently_falls_back(tmp_path, vllm_lookup, monkeypatch):
    shape = shape_by_key("qwen3-30b-a3b:tp1")
    good = cf.config_file_name(shape.e, shape.n, shape.dtype)
    bad = good.replace("dtype=fp8_w8a8", "dtype=fp8")  # plausible typo
    cf.write_config_file(tmp_path / bad, {1: TILE}, "3.6.0")
    _, got = _vllm_resolve(vllm_lookup, tmp_path, monkeypatch, shape)
    assert got != {1: TILE}, "vLLM must not have found the misnamed file"
    expected = {cf.config_file_name(s.e, s.n, s.dtype, s.block_shape) for s in SHIPPED}
    assert bad not in expected  # what the shipped-files test checks for every real file


@pytest.mark.parametrize(
    "device, expected",
    [
        ("NVIDIA H200", "NVIDIA_H200"),
        ("NVIDIA H200 NVL", "NVIDIA_H200"),
        ("NVIDIA H100 80GB HBM3", "NVIDIA_H100_80GB_HBM3"),
    ],
)
def test_device_part_of_the_name_matches_vllm(device, expected, vllm_lookup, monkeypatch):
    from vllm.model_executor.layers.fused_moe import fused_moe

    monkeypatch.setattr(fused_moe, "get_device_name_as_file_name", lambda device_id=0: device.replace(" ", "_"))
    assert cf.config_file_name(8, 14336, "fp8_w8a8", device_name=device) == fused_moe.get_config_file_name(
        8, 14336, "fp8_w8a8"
    )
    assert f"device_name={expected}," in cf.config_file_name(8, 14336, "fp8_w8a8", device_name=device)


@pytest.mark.parametrize(
    "tile, block, fragment",
    [
        (dict(TILE, SPLIT_K=1), None, "extra ['SPLIT_K']"),
        ({k: v for k, v in TILE.items() if k != "num_stages"}, None, "missing ['num_stages']"),
        (dict(TILE, BLOCK_SIZE_N=96), None, "BLOCK_SIZE_N=96 must be a power-of-two"),
        (dict(TILE, BLOCK_SIZE_K=256), [128, 128], "must divide block_shape[1]=128"),
        (dict(TILE, BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=256, num_stages=5), None, "shared memory"),
    ],
    ids=["extra key breaks vLLM's kernel call", "missing key", "non power of two", "block K", "smem"],
)
def test_tile_validation_names_the_problem(tile, block, fragment):
    assert any(fragment in p for p in cf.tile_problems(tile, block)), cf.tile_problems(tile, block)


def test_writer_refuses_an_invalid_table(tmp_path):
    with pytest.raises(ValueError, match="BLOCK_SIZE_N=96"):
        cf.write_config_file(tmp_path / "x.json", {1: dict(TILE, BLOCK_SIZE_N=96)}, "3.6.0")


def test_parse_name_rejects_other_patterns():
    with pytest.raises(ValueError, match="not a vLLM MoE config name"):
        cf.parse_config_file_name("E=8,N=14336,dtype=fp8_w8a8.json")
    assert cf.parse_config_file_name("E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json")[
        "block_shape"
    ] == [128, 128]


# --- shapes ---------------------------------------------------------------------------------


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


# --- tuner logic on a fake timer ------------------------------------------------------------

SHAPE = shape_by_key("qwen3-30b-a3b:tp1")


def default_tile(shape: KernelShape, m: int) -> dict:
    return dict(BLOCK_SIZE_M=16 if m <= 32 else 64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=128, GROUP_SIZE_M=1, num_warps=4,
                num_stages=4)  # fmt: skip


@pytest.mark.parametrize("m", [1, 8, 64, 256, 4096], ids=lambda m: f"M={m}")
def test_candidates_are_valid_start_with_the_incumbent_and_respect_the_limit(m):
    inc = default_tile(SHAPE, m)
    tiles = tune.candidate_tiles(SHAPE, m, inc)
    assert tiles[0] == inc
    assert len(tiles) <= (40 if m <= 256 else 16)
    assert len({tune.tile_id(t) for t in tiles}) == len(tiles)
    assert all(cf.tile_problems(t) == [] for t in tiles[1:])


def test_decode_candidates_include_swap_ab_tiles_and_no_wasted_block_m():
    tiles = tune.candidate_tiles(SHAPE, 1, default_tile(SHAPE, 1))
    # M=1, topk=8 of 128 experts: one row per expert, so BLOCK_SIZE_M > 16 only pads
    assert {t["BLOCK_SIZE_M"] for t in tiles} == {16}
    swap = [t for t in tiles if cf.swap_ab_engaged(t)]
    assert {t["BLOCK_SIZE_N"] for t in swap} >= {64, 128, 256}
    assert any(t["BLOCK_SIZE_N"] == 32 for t in tiles)  # non-swap narrow N, as in vLLM's own H200 files


def test_prefill_candidates_drop_tiny_block_m():
    tiles = tune.candidate_tiles(SHAPE, 4096, default_tile(SHAPE, 4096))
    assert min(t["BLOCK_SIZE_M"] for t in tiles[1:]) >= 64  # 256 rows per expert


def test_block_fp8_candidates_keep_k_inside_the_quant_block():
    ds = shape_by_key("deepseek-v3:tp8")
    tiles = tune.candidate_tiles(ds, 8, default_tile(ds, 8))
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


def make_tuner(state: tune.TuneState, deadline: float = 1e9, clock: Clock | None = None, cost=fake_cost):
    calls = []
    clock = clock or Clock()

    def measure(shape, m, tile, batches):
        calls.append((m, tune.tile_id(tile)))
        clock.t += 1.0
        return cost(shape, m, tile, batches)

    return tune.Tuner(measure, state, deadline, default_tile, clock=clock, log=lambda s: None), calls


def test_tuner_finds_the_optimum_and_writes_a_file_vllm_reads(tmp_path, vllm_lookup, monkeypatch):
    tuner, _ = make_tuner(tune.TuneState.load(tmp_path / "s.jsonl"))
    finals = tuner.tune_shape(SHAPE, [1, 64])
    assert finals[1]["tile"]["BLOCK_SIZE_N"] == 128 and finals[1]["tile"]["num_stages"] == 4
    assert finals[1]["speedup"] > 1.0
    path = tune.write_shape(SHAPE, finals, default_tile, tmp_path, {"triton": "3.6.0", "vllm": "x"}, "cmd")
    _, table = _vllm_resolve(vllm_lookup, tmp_path, monkeypatch, SHAPE)
    assert table[1] == finals[1]["tile"]
    assert table[4096] == default_tile(SHAPE, 4096)  # untuned M keep the incumbent
    prov = cf.load_provenance(tmp_path / "provenance.json")[path.name]
    assert prov["tuned_m"] == [1, 64] and prov["triton_version"] == "3.6.0"


def test_incumbent_kept_when_challenger_is_within_noise_margin():
    assert tune.pick_winner({"inc": 10.1, "new": 10.0}, "inc", margin=0.02) == "inc"
    assert tune.pick_winner({"inc": 10.5, "new": 10.0}, "inc", margin=0.02) == "new"


def test_resume_skips_every_measurement_already_in_the_state_file(tmp_path):
    state_path = tmp_path / "s.jsonl"
    tuner, calls = make_tuner(tune.TuneState.load(state_path))
    first = tuner.tune_shape(SHAPE, [1, 8])
    assert calls
    tuner2, calls2 = make_tuner(tune.TuneState.load(state_path))
    assert tuner2.tune_shape(SHAPE, [1, 8]) == first
    assert calls2 == []


def test_interrupted_screen_resumes_where_it_stopped(tmp_path):
    state_path = tmp_path / "s.jsonl"
    clock = Clock()
    tuner, calls = make_tuner(tune.TuneState.load(state_path), deadline=5.0, clock=clock)
    assert tuner.tune_m(SHAPE, 1) is None  # budget hit mid-screen: nothing final
    assert len(calls) == 5
    with state_path.open("a") as f:
        f.write('{"kind": "screen", "shape": "cut-by-kill"')  # torn last line from a kill
    tuner2, calls2 = make_tuner(tune.TuneState.load(state_path))
    rec = tuner2.tune_m(SHAPE, 1)
    assert rec is not None
    screened_again = {tid for _, tid in calls2[: len(calls2)]} & {tid for _, tid in calls}
    finalists = {tid for _, tid in calls2[-(tuner2.rounds * (tuner2.top + 1)) :]}
    assert screened_again <= finalists  # the 5 done tiles were only re-timed as finalists, never re-screened


def test_budget_stops_the_shape_loop_and_keeps_finished_m(tmp_path):
    clock = Clock()
    tuner, _ = make_tuner(tune.TuneState.load(None), deadline=100.0, clock=clock)
    finals = tuner.tune_shape(SHAPE, list(tune.M_ORDER))
    assert 0 < len(finals) < len(tune.M_ORDER)
    assert list(finals) == list(tune.M_ORDER[: len(finals)])


def test_a_tile_that_fails_to_compile_loses_instead_of_aborting(tmp_path):
    def cost(shape, m, tile, batches):
        if tile["num_stages"] == 5:
            raise RuntimeError("out of resource: shared memory")
        return fake_cost(shape, m, tile, batches)

    tuner, _ = make_tuner(tune.TuneState.load(None), cost=cost)
    rec = tuner.tune_m(SHAPE, 1)
    assert rec["tile"]["num_stages"] != 5


def test_readme_has_one_row_per_file_and_is_current():
    prov = cf.load_provenance()
    readme = cf.CONFIG_DIR / "README.md"
    assert (readme.read_text() if readme.exists() else tune.render_readme(prov)) == tune.render_readme(prov)
    table_rows = [line for line in tune.render_readme(prov).splitlines() if line.startswith("| `E=")]
    assert len(table_rows) == len(SHIPPED_FILES)


def test_readme_row_says_how_the_file_was_produced(tmp_path):
    tuner, _ = make_tuner(tune.TuneState.load(None))
    finals = tuner.tune_shape(SHAPE, [1])
    versions = {"triton": "3.6.0", "vllm": "0.26.0", "gpu": "NVIDIA H200"}
    path = tune.write_shape(SHAPE, finals, default_tile, tmp_path, versions, "python -m tools.tune --shapes x")
    text = tune.render_readme(cf.load_provenance(tmp_path / "provenance.json"))
    row = next(line for line in text.splitlines() if path.name in line)
    for part in ("qwen3-30b-a3b:tp1", "NVIDIA H200", "0.26.0", "3.6.0", "python -m tools.tune --shapes x", "(1)"):
        assert part in row
