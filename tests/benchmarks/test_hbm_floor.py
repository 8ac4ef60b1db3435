"""benchmarks.e2e.hbm_floor: the bytes a decode step must read, from the benchmark's real model configs."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from benchmarks.e2e import hbm_floor
from benchmarks.e2e.hbm_floor import DecodeGeometry, decode_floor, floor_check, geometry_from_model_dir

MODELS = Path(__file__).parents[2] / "benchmarks/e2e/models"
QWEN3 = MODELS / "qwen3-30b-a3b-fp8-static"
H200_TBPS = 4.08e12  # the project's measured HBM read bandwidth, bytes/s


def test_qwen3_geometry() -> None:
    g = geometry_from_model_dir(QWEN3)
    assert (g.moe_layers, g.num_experts, g.top_k, g.shared_expert_bytes) == (48, 128, 8, 0)
    assert g.expert_bytes == 3 * 2048 * 768  # gated (w13 + w2), FP8: one byte per element
    assert (g.attention_layers, g.kv_heads, g.head_dim, g.kv_tensors, g.attention_window) == (48, 4, 128, 2, None)
    projections = 2048 * 4096 + 2 * 2048 * 4 * 128 + 4096 * 2048  # q, k, v, o with 32 heads of 128, 4 KV heads
    assert g.dense_bytes == 48 * projections + 151936 * 2048


def test_mixtral_geometry() -> None:
    g = geometry_from_model_dir(MODELS / "mixtral-8x7b-fp8-static")
    assert (g.moe_layers, g.num_experts, g.top_k, g.shared_expert_bytes) == (32, 8, 2, 0)
    assert g.expert_bytes == 3 * 4096 * 14336
    assert (g.attention_layers, g.kv_heads, g.head_dim) == (32, 8, 128)


def test_nemotron_geometry_counts_the_pattern_and_is_not_gated() -> None:
    model = MODELS / "nemotron-3-nano-30b-a3b-fp8"
    pattern = json.loads((model / "config.json").read_text())["hybrid_override_pattern"]
    g = geometry_from_model_dir(model)  # FP8 declared in hf_quant_config.json only
    assert (g.moe_layers, g.attention_layers) == (pattern.count("E"), pattern.count("*")) == (23, 6)
    assert (g.num_experts, g.top_k, g.kv_heads, g.head_dim) == (128, 6, 2, 128)
    assert g.expert_bytes == 2 * 2688 * 1856  # relu2: up + down, no gate
    assert g.shared_expert_bytes == 1 * 2 * 2688 * 3712  # one shared expert of moe_shared_expert_intermediate_size


def test_deepseek_mla_caches_one_latent() -> None:
    g = geometry_from_model_dir(MODELS / "deepseek-v3-fp8-block")
    assert (g.moe_layers, g.attention_layers, g.kv_tensors, g.kv_heads, g.head_dim) == (58, 61, 1, 1, 512 + 64)
    assert g.shared_expert_bytes == g.expert_bytes == 3 * 7168 * 2048  # n_shared_experts x moe_intermediate_size


def test_qwen3_at_64_reads_more_than_the_dummy_row_measured() -> None:
    g = geometry_from_model_dir(QWEN3)
    floor = decode_floor(g, routing="uniform_random", conc=64, context_len=640, hbm_bytes_per_s=H200_TBPS)
    assert floor.expert_bytes / H200_TBPS * 1e3 == pytest.approx(6.99, rel=0.02)  # ~125.9 experts x 48 layers
    assert floor.bytes_total == floor.expert_bytes + floor.kv_bytes + floor.dense_bytes
    assert floor.kv_bytes == 64 * 640 * 48 * 2 * 4 * 128 * 2
    assert floor.tpot_ms == pytest.approx(floor.bytes_total / H200_TBPS * 1e3)
    ratio, verdict = floor_check(5.71, floor)  # measured with the dummy weights' collapsed routing
    assert verdict == "BELOW_FLOOR" and ratio > 1
    ratio, verdict = floor_check(11.74, floor)  # measured with uniform routing
    assert verdict == "pass" and ratio == pytest.approx(floor.tpot_ms / 11.74)
    assert floor_check(floor.tpot_ms, floor)[1] == "pass"
    nan_ratio, nan_verdict = floor_check(math.nan, floor)
    assert math.isnan(nan_ratio) and nan_verdict == ""


def test_dummy_routing_floor_is_lower_except_for_one_sequence() -> None:
    g = geometry_from_model_dir(QWEN3)

    def floor(routing: str, conc: int) -> float:
        return decode_floor(g, routing=routing, conc=conc, context_len=640, hbm_bytes_per_s=H200_TBPS).tpot_ms

    assert floor("dummy", 64) < floor("uniform_random", 64)
    assert floor("dummy", 1) == pytest.approx(floor("uniform_random", 1))


def test_window_caps_the_kv_read() -> None:
    g = DecodeGeometry(1, 8, 2, 0, 0, attention_layers=1, kv_heads=1, head_dim=1, dense_bytes=0, attention_window=100)
    assert decode_floor(g, routing="dummy", conc=3, context_len=640, hbm_bytes_per_s=1.0).kv_bytes == 3 * 100 * 2 * 2


def _copy_with(tmp_path: Path, drop: str = "", **changes: object) -> Path:
    model = tmp_path / "model"
    shutil.copytree(QWEN3, model)
    config = json.loads((model / "config.json").read_text())
    config.pop(drop, None)
    config.update(changes)
    (model / "config.json").write_text(json.dumps(config))
    return model


def test_missing_key_names_it_and_the_directory(tmp_path: Path) -> None:
    model = _copy_with(tmp_path, drop="num_key_value_heads")
    with pytest.raises(ValueError, match="num_key_value_heads") as info:
        geometry_from_model_dir(model)
    assert str(model) in str(info.value)


def test_bf16_checkpoint_counts_two_bytes(tmp_path: Path) -> None:
    model = _copy_with(tmp_path, drop="quantization_config", sliding_window=4096, use_sliding_window=True)
    g = geometry_from_model_dir(model)
    assert g.expert_bytes == 2 * 3 * 2048 * 768
    assert g.attention_window == 4096


def test_cli_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert hbm_floor.main([str(QWEN3), "--conc", "1,8,64", "--context-len", "640", "--hbm-tbps", "4.08"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "floor" not in lines[0] and "uniform_one_launch" in lines[0]  # the harness's default routing
    assert lines[1].split() == ["conc", "experts/layer", "experts_GB", "kv_GB", "dense_GB", "GB_read", "floor_ms"]
    rows = [line.split() for line in lines[2:]]
    assert [r[0] for r in rows] == ["1", "8", "64"]
    assert rows[2][1] == "125.9" and float(rows[2][-1]) > 6.99


def test_the_bandwidth_probe_runs_off_gpu() -> None:
    pytest.importorskip("torch")
    from tools.measure import hbm_read_gbs

    assert hbm_read_gbs(1 / 1024, device="cpu", reps=3) > 0
