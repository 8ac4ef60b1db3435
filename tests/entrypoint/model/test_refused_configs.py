"""describe_model refuses a configuration it cannot describe with a ConfigError that names the offending
key: option.quantize on a pre-quantised checkpoint or with a value vLLM cannot apply online, values of the wrong
type or range where a count belongs (entrypoint.model.config_json), and quantisation configs the scheme parsers
cannot accept; the error must name the file and key (nested keys included) and carry the given fragments of its
message."""

from __future__ import annotations

from typing import Any

import pytest

from entrypoint.model.describe import describe_model
from entrypoint.utils.errors import ConfigError
from tests.entrypoint.model.describe_helpers import load, qwen3_config

ERROR_CASES: list[tuple[str, dict[str, Any], dict[str, Any] | None, str | None, str, list[str]]] = [
    (
        "option.quantize on a pre-quantised fp8 checkpoint is refused",
        load("qwen3-30b-a3b-fp8")[0],
        None,
        "fp8",
        "option.quantize",
        ["already quantised as fp8", "remove option.quantize"],
    ),
    (
        "option.quantize on a ModelOpt hf_quant_config.json checkpoint is refused",
        load("nvidia-nemotron-3-nano-30b-a3b-fp8")[0],
        load("nvidia-nemotron-3-nano-30b-a3b-fp8")[1],
        "fp8",
        "option.quantize",
        ["already quantised as modelopt"],
    ),
    (
        "an option.quantize vLLM cannot apply online lists the accepted values",
        qwen3_config(),
        None,
        "awq",
        "option.quantize",
        ["'awq'", "Accepted: fp8, fp8_per_tensor"],
    ),
    (
        "a string where the expert count belongs names the key and the file",
        qwen3_config(num_experts="128"),
        None,
        None,
        "config.json:num_experts",
        ["expected an integer", "got str"],
    ),
    (
        "a boolean top-k is not a count",
        qwen3_config(num_experts_per_tok=True),
        None,
        None,
        "config.json:num_experts_per_tok",
        ["expected an integer >= 1"],
    ),
    (
        "a nested text_config error names the nested key",
        {"model_type": "llama4", "text_config": {"num_local_experts": 16, "num_experts_per_tok": [1, "x"]}},
        None,
        None,
        "config.json:text_config.num_experts_per_tok",
        ["list of integers"],
    ),
    (
        "an MoE without experts-per-token is refused with the accepted aliases",
        qwen3_config(num_experts_per_tok=None),
        None,
        None,
        "config.json:num_experts_per_tok",
        ["must set experts per token", "moe_topk"],
    ),
    (
        "top-k larger than the expert count is refused",
        qwen3_config(num_experts_per_tok=129),
        None,
        None,
        "config.json:num_experts_per_tok",
        ["more experts per token than num_experts=128"],
    ),
    (
        "quantization_config that is not an object names the key",
        qwen3_config(quantization_config="fp8"),
        None,
        None,
        "config.json:quantization_config",
        ["expected a JSON object"],
    ),
    (
        "native fp8 without activation_scheme is refused",
        qwen3_config(quantization_config={"quant_method": "fp8"}),
        None,
        None,
        "config.json:quantization_config.activation_scheme",
        ["must declare its activation scheme", "Accepted: static, dynamic"],
    ),
    (
        "block fp8 with static activations is refused as vLLM does",
        qwen3_config(
            quantization_config={"quant_method": "fp8", "activation_scheme": "static", "weight_block_size": [128, 128]}
        ),
        None,
        None,
        "config.json:quantization_config.activation_scheme",
        ["need dynamic activations"],
    ),
    (
        "a three-dimensional weight_block_size is refused",
        qwen3_config(
            quantization_config={"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [1, 2, 3]}
        ),
        None,
        None,
        "config.json:quantization_config.weight_block_size",
        ["two block dimensions"],
    ),
    (
        "hf_quant_config.json without quant_algo names that file",
        qwen3_config(),
        {"producer": {"name": "modelopt"}, "quantization": {"kv_cache_quant_algo": "FP8"}},
        None,
        "hf_quant_config.json:quantization.quant_algo",
        ["must name its quant_algo", "NVFP4"],
    ),
    (
        "a quantisation config without quant_method is refused",
        qwen3_config(quantization_config={"bits": 4}),
        None,
        None,
        "config.json:quantization_config.quant_method",
        ["must name its method"],
    ),
    (
        "an unknown compressed-tensors strategy lists the known ones",
        qwen3_config(
            quantization_config={
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 8, "strategy": "attn_head"}}},
            }
        ),
        None,
        None,
        "config.json:quantization_config.config_groups.g.weights.strategy",
        ["unknown compressed-tensors strategy", "tensor, channel"],
    ),
]


@pytest.mark.parametrize(
    ("config", "hf_quant", "quantize", "key", "fragments"),
    [c[1:] for c in ERROR_CASES],
    ids=[c[0] for c in ERROR_CASES],
)
def test_refused_configuration(
    config: dict[str, Any], hf_quant: dict[str, Any] | None, quantize: str | None, key: str, fragments: list[str]
) -> None:
    with pytest.raises(ConfigError) as info:
        describe_model(config, hf_quant, source="x", quantize=quantize)
    assert info.value.key == key
    for fragment in fragments:
        assert fragment in str(info.value)
