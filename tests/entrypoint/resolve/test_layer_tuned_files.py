"""Tuned files in the compile-cache layer (issue 32): the plan reads the layer's tile files and dispatch table before
the image's, the user's own folder or table before both, says which it took in one reason line, and a layer whose
files moved (bake folder → image path) still matches its plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from entrypoint.caches import compile_layer
from entrypoint.inputs.gather import build_plan, load_dispatch_table, tuned_config_indexes
from entrypoint.resolve.layer_files import LAYER_ENV, TUNED_DISPATCH_FILE, TUNED_FOLDER
from entrypoint.resolve.plan import Plan
from entrypoint.resolve.tuned_configs import CONFIG_DIR_ENV, ORIGIN_IMAGE, ORIGIN_LAYER, TUNED_FOLDER_ENV
from entrypoint.utils.errors import ConfigError
from kernels.config_files import PROVENANCE_FILE
from kernels.dispatch import DISPATCH_FILE, TABLE_ENV
from tests.conftest_paths import FIXTURE_MODELS

MIXTRAL = str(FIXTURE_MODELS / "mixtral-8x7b-instruct-v0.1-fp8")  # FP8 static, 8 experts of 14336 on 4096, top-2
MIXTRAL_FILE = "E=8,N=14336,device_name=NVIDIA_H200,dtype=fp8_w8a8.json"
TUNED_AT = "2026-12-04T13:00:00Z"
TILE = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 3}
MIXTRAL_ROW = {"shape": "tuned-here", "device": "NVIDIA_H200", "experts": 8, "n": 14336, "hidden": 4096, "top_k": 2,
               "scales": "tensor-static", "activation": "silu", "token_ranges": [[1, 2]]}  # fmt: skip


def make_layer(root: Path, *, tile: bool = True, table: dict | None = None) -> Path:
    """A layer as `make cache-layer` leaves it: tuned/ with a tile file, its provenance and a dispatch table."""
    tuned = root / "layer" / TUNED_FOLDER
    tuned.mkdir(parents=True)
    if tile:
        (tuned / MIXTRAL_FILE).write_text(json.dumps({"1": TILE}))
        (tuned / PROVENANCE_FILE.name).write_text(json.dumps({MIXTRAL_FILE: {"date": TUNED_AT}}))
    if table is not None:
        (tuned / TUNED_DISPATCH_FILE).write_text(json.dumps(table))
    return tuned.parent


def image_configs(root: Path, *names: str) -> Path:
    folder = root / "image-configs"
    folder.mkdir()
    for name in names:
        (folder / name).write_text(json.dumps({"1": TILE}))
    return folder


def plan_for(environ: dict[str, str]) -> Plan:
    return build_plan(model=MIXTRAL, gpu="H200", vllm_version="0.32.0", environ=environ)


def tuned_reason(plan: Plan) -> str:
    (line,) = [r for r in plan.reasons if r.startswith("tuned configs:")]
    return line


def test_the_layers_tile_file_comes_before_the_images(tmp_path: Path) -> None:
    layer = make_layer(tmp_path)
    image = image_configs(tmp_path, MIXTRAL_FILE)
    plan = plan_for({LAYER_ENV: str(layer), CONFIG_DIR_ENV: str(image)})
    assert plan.env[TUNED_FOLDER_ENV] == str(layer / TUNED_FOLDER)
    assert tuned_reason(plan) == (
        f"tuned configs: {MIXTRAL_FILE}: tuned on this GPU at {TUNED_AT} by `make cache-layer` (docs/kernels.md)"
    )


def test_without_the_shape_in_the_layer_the_images_file_is_used(tmp_path: Path) -> None:
    layer = make_layer(tmp_path, tile=False)
    (layer / TUNED_FOLDER / "E=16,N=1024,device_name=NVIDIA_H200,dtype=fp8_w8a8.json").write_text("{}")
    image = image_configs(tmp_path, MIXTRAL_FILE)
    plan = plan_for({LAYER_ENV: str(layer), CONFIG_DIR_ENV: str(image)})
    assert plan.env[TUNED_FOLDER_ENV] == str(image)
    assert "baked file matches" in tuned_reason(plan)


def test_the_users_own_folder_beats_the_layer(tmp_path: Path) -> None:
    layer = make_layer(tmp_path)
    plan = plan_for({LAYER_ENV: str(layer), TUNED_FOLDER_ENV: "/mine"})
    assert TUNED_FOLDER_ENV not in plan.env  # the user's variable reaches vLLM as it is
    assert tuned_reason(plan) == f"tuned configs: {TUNED_FOLDER_ENV} already set by the user, left as is"


def test_no_file_for_the_shape_anywhere_says_where_it_looked(tmp_path: Path) -> None:
    layer = make_layer(tmp_path, tile=False)
    (layer / TUNED_FOLDER / "E=16,N=1024,device_name=NVIDIA_H200,dtype=fp8_w8a8.json").write_text("{}")
    image = image_configs(tmp_path, "E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json")
    plan = plan_for({LAYER_ENV: str(layer), CONFIG_DIR_ENV: str(image)})
    assert TUNED_FOLDER_ENV not in plan.env
    assert tuned_reason(plan) == (
        f"tuned configs: {MIXTRAL_FILE}: no file for this shape in the layer or image"
        "; vLLM's tiles run (tune: docs/kernels.md)"
    )


def test_the_indexes_come_layer_first_with_the_dates_of_their_provenance(tmp_path: Path) -> None:
    layer = make_layer(tmp_path)
    image = image_configs(tmp_path, MIXTRAL_FILE)
    found = tuned_config_indexes({LAYER_ENV: str(layer), CONFIG_DIR_ENV: str(image)})
    assert [(i.origin, i.folder) for i in found] == [
        (ORIGIN_LAYER, str(layer / TUNED_FOLDER)),
        (ORIGIN_IMAGE, str(image)),
    ]
    assert found[0].tuned_at == {MIXTRAL_FILE: TUNED_AT} and found[1].tuned_at == {}
    # a layer without tuned files (made before issue 32, or on the CPU flavour) adds nothing
    (tmp_path / "bare").mkdir()
    assert [
        i.origin for i in tuned_config_indexes({LAYER_ENV: str(tmp_path / "bare"), CONFIG_DIR_ENV: str(image)})
    ] == [ORIGIN_IMAGE]


def test_the_layers_dispatch_table_reaches_the_plan_and_the_plugin(tmp_path: Path) -> None:
    layer = make_layer(tmp_path, table={"rows": [MIXTRAL_ROW]})
    table = layer / TUNED_FOLDER / TUNED_DISPATCH_FILE
    plan = plan_for({LAYER_ENV: str(layer)})
    # the shipped table has no Mixtral row (our kernel loses there); the layer's, measured on this GPU, has one
    assert plan.env[TABLE_ENV] == str(table)  # what the plugin inside vLLM's processes reads
    (line,) = [r for r in plan.reasons if r.startswith("moe_kernel:")]
    assert (
        line.startswith("moe_kernel: project (auto): ours at M=1..2 for E=8,N=14336,K=4096,top_k=2")
        and str(table) in line
    )
    assert TABLE_ENV not in plan_for({}).env  # the shipped table: nothing to name


def test_the_users_dispatch_table_beats_the_layers(tmp_path: Path) -> None:
    layer = make_layer(tmp_path, table={"rows": [MIXTRAL_ROW]})
    assert load_dispatch_table({LAYER_ENV: str(layer)}).source == str(layer / TUNED_FOLDER / TUNED_DISPATCH_FILE)
    assert load_dispatch_table({LAYER_ENV: str(layer), TABLE_ENV: str(DISPATCH_FILE)}).source == str(DISPATCH_FILE)
    assert load_dispatch_table({}).source == str(DISPATCH_FILE)


def test_a_broken_layer_table_is_refused_naming_it(tmp_path: Path) -> None:
    layer = make_layer(tmp_path, table={"rows": [{**MIXTRAL_ROW, "scales": "per-row"}]})
    with pytest.raises(ConfigError) as caught:
        plan_for({LAYER_ENV: str(layer)})
    text = str(caught.value)
    assert "the compile-cache layer's dispatch table" in text and "per-row" in text and TUNED_DISPATCH_FILE in text


def test_a_layer_moved_from_the_bake_folder_to_the_image_keeps_its_key(tmp_path: Path) -> None:
    baked = make_layer(tmp_path / "bake", table={"rows": [MIXTRAL_ROW]})
    moved = make_layer(tmp_path / "image", table={"rows": [MIXTRAL_ROW]})
    at_bake, at_start = plan_for({LAYER_ENV: str(baked)}), plan_for({LAYER_ENV: str(moved)})
    assert at_bake.env[TUNED_FOLDER_ENV] != at_start.env[TUNED_FOLDER_ENV]
    assert compile_layer.plan_digest(at_bake) == compile_layer.plan_digest(at_start)
    # other tiles compile other kernels: the key changes with the content
    (moved / TUNED_FOLDER / MIXTRAL_FILE).write_text(json.dumps({"1": {**TILE, "num_stages": 4}}))
    assert compile_layer.plan_digest(at_bake) != compile_layer.plan_digest(plan_for({LAYER_ENV: str(moved)}))
