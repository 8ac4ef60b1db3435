"""benchmarks.e2e.random_checkpoint: the names vLLM's Qwen3-MoE loader reads, FP8 codes that use their range
(dummy weights round to 0), scales that give the weights back, and a refusal for what it does not write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from benchmarks.e2e import random_checkpoint as rc
from benchmarks.e2e import spec

SMALL = {  # the bundled Qwen3-30B-A3B config, shrunk so the test writes a few MB
    **spec.load_config(spec.resolve_model_dir("qwen3-30b-a3b-fp8-static")),
    "hidden_size": 64, "vocab_size": 300, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "num_experts": 4, "moe_intermediate_size": 32, "num_hidden_layers": 3, "max_position_embeddings": 256,
}  # fmt: skip


def test_the_tensors_are_the_qwen3_moe_fp8_static_checkpoint_layout() -> None:
    tensors = rc.make_tensors(SMALL, layers=2, seed=0, device="cpu")
    assert "model.layers.1.mlp.experts.3.down_proj.weight" in tensors
    assert "model.layers.2.input_layernorm.weight" not in tensors  # cut to 2 layers
    w = tensors["model.layers.0.mlp.experts.0.gate_proj.weight"]
    assert w.dtype == torch.float8_e4m3fn and tuple(w.shape) == (32, 64)
    assert tensors["model.layers.0.mlp.gate.weight"].dtype == torch.float8_e4m3fn  # the fp8 config quantises it
    assert tensors["lm_head.weight"].dtype == torch.bfloat16 and tuple(tensors["lm_head.weight"].shape) == (300, 64)
    fp8 = [n for n, t in tensors.items() if t.dtype == torch.float8_e4m3fn]
    for name in fp8:  # every quantised Linear has both per-tensor scales, 0-d float32 as AutoFP8 writes them
        stem = name.removesuffix(".weight")
        for scale in ("weight_scale", "input_scale"):
            s = tensors[f"{stem}.{scale}"]
            assert s.dtype == torch.float32 and s.dim() == 0 and float(s) > 0
    assert set(tensors) == {n for n, _, _ in rc.tensor_specs(SMALL, 2)} | {
        f"{n.removesuffix('.weight')}.{s}" for n in fp8 for s in ("weight_scale", "input_scale")
    }


def test_fp8_codes_use_their_range_and_the_scale_gives_the_weight_back() -> None:
    tensors = rc.make_tensors(SMALL, layers=1, seed=0, device="cpu")
    name = "model.layers.0.self_attn.q_proj.weight"
    codes = tensors[name].float()
    assert (codes == 0).float().mean() < 0.05  # dummy U(-1e-3, 1e-3) weights would be all 0 here
    assert codes.abs().max() == pytest.approx(rc.FP8_MAX)
    weights = codes * tensors["model.layers.0.self_attn.q_proj.weight_scale"]
    assert weights.std().item() == pytest.approx(1 / 64**0.5, rel=0.15)  # N(0, 1/fan_in)
    again = rc.make_tensors(SMALL, layers=1, seed=0, device="cpu")[name]
    assert torch.equal(again.view(torch.uint8), tensors[name].view(torch.uint8))  # deterministic for a seed


def test_write_makes_a_loadable_folder_and_reuses_it(tmp_path: Path) -> None:
    model = tmp_path / "small"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(SMALL))
    dest = rc.write(str(model), 2, tmp_path / "ckpt", device="cpu")
    config = json.loads((dest / "config.json").read_text())
    assert config["num_hidden_layers"] == 2 and config["quantization_config"]["activation_scheme"] == "static"
    assert (dest / "tokenizer.json").is_file()
    assert len(load_file(str(dest / "model.safetensors"))) == len(rc.make_tensors(SMALL, 2, 0, "cpu"))
    stamp = (dest / "model.safetensors").stat().st_mtime_ns
    rc.write(str(model), 2, tmp_path / "ckpt", device="cpu")
    assert (dest / "model.safetensors").stat().st_mtime_ns == stamp


@pytest.mark.parametrize(
    ("change", "named"),
    [({"architectures": ["MixtralForCausalLM"]}, "architectures"),
     ({"quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}}, "activation_scheme")],
)  # fmt: skip
def test_what_it_does_not_write_is_refused_with_the_field(change: dict, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        rc.check_supported({**SMALL, **change})


def test_the_command_exits_2_naming_the_layers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert rc.main(["--model", "qwen3-30b-a3b-fp8-static", "--layers", "99", "--dest", str(tmp_path)]) == 2
    assert "layers=99" in capsys.readouterr().err
