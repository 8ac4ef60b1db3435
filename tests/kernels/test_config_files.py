"""The tuned fused-MoE config files kernels/ ships: vLLM's own lookup finds each one, the schema is what vLLM
parses, swap-AB engages where the tile asks for it, a misnamed file is caught, the folder's README is current.
The tuner that writes them: tests/kernels/test_tuning_search.py."""

from __future__ import annotations

import json

import pytest

from kernels import config_files as cf
from kernels.shapes import SHIPPED, shape_by_key
from tests.vllm_moe_lookup import vllm_resolve
from tools import tune

SHIPPED_FILES = cf.shipped_files()
TILE = dict(BLOCK_SIZE_M=16, BLOCK_SIZE_N=128, BLOCK_SIZE_K=128, GROUP_SIZE_M=1, num_warps=4, num_stages=4)


# --- the shipped files -------------------------------------------------------------------------


def test_the_folder_ships_tuned_files_and_their_provenance():
    """Every test below is parametrized over the shipped files: with none found (the folder moved, a glob that
    misses) they would all be skipped and the suite would pass having checked no file."""
    assert cf.PROVENANCE_FILE.is_file()
    assert len(SHIPPED_FILES) >= 13, [p.name for p in SHIPPED_FILES]


@pytest.mark.parametrize("path", SHIPPED_FILES, ids=lambda p: p.name)
def test_shipped_file_resolves_through_vllm_lookup_for_the_shape_it_was_tuned_for(path, vllm_lookup, monkeypatch):
    prov = cf.load_provenance()
    assert path.name in prov, f"{path.name} has no provenance row (how was it produced?)"
    shape = shape_by_key(prov[path.name]["shape"])
    name, table = vllm_resolve(vllm_lookup, cf.CONFIG_DIR, monkeypatch, shape)
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


def test_the_folder_holds_only_fused_moe_tile_files():
    assert cf.foreign_files() == []


def test_a_mamba_or_lora_config_in_the_folder_is_foreign(tmp_path):
    """vLLM reads the same folder for these (docs/kernels.md): the check above must see them."""
    (tmp_path / "README.md").write_text("x")
    (tmp_path / cf.config_file_name(128, 768, "fp8_w8a8", None)).write_text("{}")
    ssu = "headdim=64,dstate=128,device_name=NVIDIA_H200,cache_dtype=float32.json"
    lora = "NVIDIA_H200_SHRINK.json"
    for name in (ssu, lora):
        (tmp_path / name).write_text("{}")
    assert cf.foreign_files(tmp_path) == sorted([lora, ssu])


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
    cf.write_config_file(tmp_path / name, table, "3.7.1")
    vname, got = vllm_resolve(vllm_lookup, tmp_path, monkeypatch, shape)
    assert vname == name
    assert got == table
    for m in (1, 3, 50, 100, 3000):
        assert cf.lookup(got, m) == got[min(got, key=lambda x: abs(x - m))]


def test_misnamed_file_is_detected_and_vllm_silently_falls_back(tmp_path, vllm_lookup, monkeypatch):
    shape = shape_by_key("qwen3-30b-a3b:tp1")
    good = cf.config_file_name(shape.e, shape.n, shape.dtype)
    bad = good.replace("dtype=fp8_w8a8", "dtype=fp8")  # plausible typo
    cf.write_config_file(tmp_path / bad, {1: TILE}, "3.7.1")
    _, got = vllm_resolve(vllm_lookup, tmp_path, monkeypatch, shape)
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
        cf.write_config_file(tmp_path / "x.json", {1: dict(TILE, BLOCK_SIZE_N=96)}, "3.7.1")


def test_parse_name_rejects_other_patterns():
    with pytest.raises(ValueError, match="not a vLLM MoE config name"):
        cf.parse_config_file_name("E=8,N=14336,dtype=fp8_w8a8.json")
    assert cf.parse_config_file_name("E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json")[
        "block_shape"
    ] == [128, 128]


# --- the folder's README ---------------------------------------------------------------------


def test_readme_has_one_row_per_file_and_is_current():
    prov = cf.load_provenance()
    readme = cf.CONFIG_DIR / "README.md"
    # a missing README used to be replaced by the render itself, comparing the render with itself
    assert readme.is_file(), f"{readme} is missing; python -m tools.tune --write-readme writes it"
    assert readme.read_text() == tune.render_readme(prov), "stale: python -m tools.tune --write-readme"
    table_rows = [line for line in tune.render_readme(prov).splitlines() if line.startswith("| `E=")]
    assert len(table_rows) == len(SHIPPED_FILES)
