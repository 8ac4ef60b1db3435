"""kernels.dispatch: the table's reader names the row and field of a malformed entry; lookups by shape and M."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from kernels.dispatch import (
    COMPARISON_ONLY_FIELDS,
    DISPATCH_FILE,
    KERNEL_CONFIG_FIELDS,
    DispatchKey,
    DispatchTable,
    DispatchTableError,
    parse_row,
)
from kernels.shapes import shape_by_key
from kernels.tuning.dispatch_rows import OURS_MS, KernelPair, config_record, dispatch_row

ROW = json.loads(DISPATCH_FILE.read_text())["rows"][0]


def _write(tmp_path: Path, rows: object) -> Path:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"rows": rows}))
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"scales": "channel"}, "row 0: scales='channel'; accepted: tensor-static, block-dynamic"),
        ({"activation": "gelu"}, "row 0: activation='gelu'; accepted: silu, relu2"),
        ({"experts": "128"}, "row 0: field 'experts' must be int, got '128'"),
        ({"top_k": True}, "row 0: field 'top_k' must be int, got True"),
        ({"token_ranges": [[4, 2]]}, "row 0: token range [4, 2] must be [lo, hi] with 1 <= lo <= hi"),
        ({"token_ranges": "1-2"}, "row 0: field 'token_ranges' must be a list of [lo, hi], got '1-2'"),
        ({"measured": [{"m": 1, "config": {"tile": 64}}]}, "row 0: config {'tile': 64} at m=1: fields must be among"),
        ({"measured": [{"m": 1, "config": {"split_k": "2"}}]}, "with int or bool values"),
    ],
)
def test_a_malformed_row_is_refused_naming_row_and_field(tmp_path: Path, change: dict, message: str) -> None:
    with pytest.raises(DispatchTableError, match=None) as caught:
        DispatchTable.load(_write(tmp_path, [{**ROW, **change}]))
    assert message in str(caught.value)


def test_an_unreadable_file_is_a_dispatch_table_error(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(DispatchTableError, match="cannot read the dispatch table"):
        DispatchTable.load(tmp_path / "bad.json")
    with pytest.raises(DispatchTableError, match="expected an object with a 'rows' list"):
        DispatchTable.load(_write(tmp_path, {"a": 1}))


def test_lookup_by_shape_device_and_token_count() -> None:
    table = DispatchTable.load()
    key = DispatchKey.of(128, 768, 2048, 8, "tensor-static", "NVIDIA H200 NVL")
    row = table.row(key)
    assert row is not None and row.shape == "qwen3-30b-a3b:tp1"
    assert [m for m in (1, 2, 4, 8, 16) if row.uses_project_kernel(m, "silu")] == [1]
    assert not row.uses_project_kernel(1, "relu2")  # measured with SiLU
    assert table.row(DispatchKey.of(128, 768, 2048, 8, "tensor-static", "NVIDIA H100 80GB HBM3")) is None
    assert table.row(DispatchKey.of(8, 14336, 4096, 2, "tensor-static", "NVIDIA H200")) is None  # no winning M


def test_a_tuned_rows_configs_apply_from_their_m_up_and_shipped_rows_have_none(tmp_path: Path) -> None:
    # a bake-time tune's row (entrypoint/caches/tune_layer.py): our kernel's config per measured M where it beat the
    # default heuristic; M = 2 kept the default
    measured = [{"m": 1, "config": {"pair_mode": True, "split_k": 4}}, {"m": 2}, {"m": 4, "config": {"block_n1": 32}}]
    table = DispatchTable.load(_write(tmp_path, [{**ROW, "token_ranges": [[1, 8]], "measured": measured}]))
    row = next(iter(table.rows.values()))
    assert row.kernel_config(1) == {"pair_mode": True, "split_k": 4}
    assert row.kernel_config(3) is None  # the nearest measured M at or below, 2, ran the default heuristic
    assert row.kernel_config(8) == {"block_n1": 32}
    shipped = DispatchTable.load(DISPATCH_FILE)
    assert all(r.kernel_config(1) is None for r in shipped.rows.values())


def test_every_kernel_config_field_is_either_tuned_or_comparison_only() -> None:
    """A field added to our kernel's config must be classified before a tune can write it into a row."""
    from ops.fused_moe_fp8 import MoEKernelConfig

    assert {f.name for f in dataclasses.fields(MoEKernelConfig)} == {*KERNEL_CONFIG_FIELDS, *COMPARISON_ONLY_FIELDS}
    assert not set(KERNEL_CONFIG_FIELDS) & set(COMPARISON_ONLY_FIELDS)


@pytest.mark.parametrize(
    "key", ["qwen3-30b-a3b:tp1", "mixtral-8x7b:tp1", "nemotron-3-nano-30b-a3b:tp1", "deepseek-v3:tp8"]
)
def test_each_swept_config_survives_the_row_a_tune_writes(key: str) -> None:
    """What the tune records of a config (kernels/tuning/gpu.py) parses as a row and gives the same config back:
    2026-12-06e, a tune (Phi-3.5-MoE) wrote every field of the config and its own check refused the row."""
    from ops.fused_moe_fp8 import MoEKernelConfig, candidate_configs

    shape = shape_by_key(key)
    block_k = shape.block_shape[1] if shape.block_shape else 128
    for m in OURS_MS:
        for config in candidate_configs(m, shape.e, shape.topk, shape.h, shape.n, block_k=block_k):
            pair = KernelPair(m, 9.0, 10.0, 9.0, 10.0, dataclasses.asdict(config))  # as kernels/tuning/gpu.py
            row = parse_row(dispatch_row(shape, key, "NVIDIA H200", [pair], "2026-12-06"), key)
            assert MoEKernelConfig(**(row.kernel_config(m) or {})) == config


def test_a_comparison_switch_that_is_on_never_reaches_a_row() -> None:
    from ops.fused_moe_fp8 import default_config

    config = dataclasses.replace(default_config(1, 128, 8, 2048, 768), atomic_sum=True)
    with pytest.raises(ValueError, match="atomic_sum is a comparison switch, not a tune's choice"):
        config_record(config)


def test_a_resumed_tune_state_with_every_field_still_makes_a_row() -> None:
    """A tune killed before 2026-12-06e left its pairs with the whole config (comparison switches off) in its state
    file; the resumed tune builds its row from them."""
    from ops.fused_moe_fp8 import MoEKernelConfig, candidate_configs

    shape = shape_by_key("qwen3-30b-a3b:tp1")
    config = candidate_configs(1, shape.e, shape.topk, shape.h, shape.n)[-1]
    pair = KernelPair(1, 9.0, 10.0, config=dataclasses.asdict(config))
    row = parse_row(dispatch_row(shape, "q", "NVIDIA H200", [pair], "2026-12-06"), "q")
    assert MoEKernelConfig(**(row.kernel_config(1) or {})) == config
