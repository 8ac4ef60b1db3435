"""describe_model on the quantisation schemes a checkpoint declares (entrypoint.model.quant_schemes):
variations of the Qwen3-30B-A3B config carry the quantization_config (or legacy compression_config) of each family
the parsers know (native fp8, ModelOpt, compressed-tensors, bitsandbytes, GPTQ, an unknown method), and each must
come out as the expected weight and activation dtype, scheme and granularity; an unquantised model's weight dtype
follows torch_dtype or dtype, and hf_quant_config.json is ignored when config.json already declares its
quantisation."""

from __future__ import annotations

from typing import Any

import pytest

from entrypoint.model.types import (
    ActivationScheme as Act,
)
from entrypoint.model.types import (
    Granularity as G,
)
from entrypoint.model.types import (
    QuantFamily,
    Quantization,
    WeightDtype,
)
from tests.entrypoint.model.describe_helpers import NATIVE_FP8_BLOCK, fp8, load, quant_of, qwen3_config

QUANT_VARIATIONS: list[tuple[str, dict[str, Any], dict[str, Any] | None, Quantization]] = [
    (
        "native fp8 without weight_block_size and dynamic scheme is per-tensor dynamic",
        {"quant_method": "fp8", "activation_scheme": "dynamic"},
        None,
        fp8(QuantFamily.FP8, "fp8", G.TENSOR, Act.DYNAMIC, G.TENSOR),
    ),
    (
        "ModelOpt FP8 declared inside config.json is per-tensor static",
        {"quant_method": "modelopt", "quant_algo": "FP8"},
        None,
        fp8(QuantFamily.MODELOPT, "modelopt", G.TENSOR, Act.STATIC, G.TENSOR),
    ),
    (
        "ModelOpt FP8 in the hf_quant_config.json layout embedded in config.json is recognised by its producer",
        {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "fp8"}},
        None,
        fp8(QuantFamily.MODELOPT, "modelopt", G.TENSOR, Act.STATIC, G.TENSOR),
    ),
    (
        "ModelOpt FP8_PER_CHANNEL_PER_TOKEN is channel x dynamic token",
        {"quant_method": "modelopt", "quant_algo": "FP8_PER_CHANNEL_PER_TOKEN"},
        None,
        fp8(QuantFamily.MODELOPT, "modelopt", G.CHANNEL, Act.DYNAMIC, G.TOKEN),
    ),
    (
        "ModelOpt FP8_PB_WO is 128x128 block weights",
        {"quant_method": "modelopt", "quant_algo": "FP8_PB_WO"},
        None,
        fp8(QuantFamily.MODELOPT, "modelopt", G.BLOCK, Act.DYNAMIC, G.GROUP, block_shape=(128, 128)),
    ),
    (
        "an unknown ModelOpt algorithm is ModelOpt with unknown weights",
        {"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"},
        None,
        Quantization(
            family=QuantFamily.MODELOPT, method="modelopt", weight_dtype=WeightDtype.OTHER, source="config.json"
        ),
    ),
    (
        "a compressed-tensors weight-only int4 group scheme has 16-bit activations",
        {
            "quant_method": "compressed-tensors",
            "format": "pack-quantized",
            "config_groups": {
                "group_0": {
                    "targets": ["Linear"],
                    "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128},
                    "input_activations": None,
                }
            },
        },
        None,
        Quantization(
            family=QuantFamily.COMPRESSED_TENSORS,
            method="compressed-tensors",
            weight_dtype=WeightDtype.INT4,
            weight_granularity=G.GROUP,
            group_size=128,
            source="config.json",
        ),
    ),
    (
        "a compressed-tensors int8 channel x dynamic token scheme is W8A8 int8",
        {
            "quant_method": "compressed-tensors",
            "format": "int-quantized",
            "config_groups": {
                "group_0": {
                    "targets": ["Linear"],
                    "weights": {"num_bits": 8, "type": "int", "strategy": "channel"},
                    "input_activations": {"num_bits": 8, "type": "int", "strategy": "token", "dynamic": True},
                }
            },
        },
        None,
        Quantization(
            family=QuantFamily.COMPRESSED_TENSORS,
            method="compressed-tensors",
            weight_dtype=WeightDtype.INT8,
            weight_granularity=G.CHANNEL,
            activation_dtype=WeightDtype.INT8,
            activation_scheme=Act.DYNAMIC,
            activation_granularity=G.TOKEN,
            source="config.json",
        ),
    ),
    (
        "the config group that targets experts wins over the Linear group",
        {
            "quant_method": "compressed-tensors",
            "config_groups": {
                "attn": {
                    "targets": ["Linear"],
                    "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
                    "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True},
                },
                "moe": {
                    "targets": ["re:.*experts.*"],
                    "weights": {"num_bits": 8, "type": "float", "strategy": "tensor"},
                    "input_activations": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False},
                },
            },
        },
        None,
        fp8(QuantFamily.COMPRESSED_TENSORS, "compressed-tensors", G.TENSOR, Act.STATIC, G.TENSOR),
    ),
    (
        "the legacy compression_config key is read like quantization_config",
        {},  # filled in by the test below
        None,
        fp8(QuantFamily.COMPRESSED_TENSORS, "compressed-tensors", G.TENSOR, Act.STATIC, G.TENSOR),
    ),
    (
        "bitsandbytes 4-bit is weight-only with non-integer weights",
        {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"},
        None,
        Quantization(
            family=QuantFamily.BITSANDBYTES,
            method="bitsandbytes",
            weight_dtype=WeightDtype.OTHER,
            weight_granularity=G.GROUP,
            source="config.json",
        ),
    ),
    (
        "GPTQ with group_size -1 is per-channel int4",
        {"quant_method": "gptq", "bits": 4, "group_size": -1},
        None,
        Quantization(
            family=QuantFamily.GPTQ,
            method="gptq",
            weight_dtype=WeightDtype.INT4,
            weight_granularity=G.CHANNEL,
            source="config.json",
        ),
    ),
    (
        "an unknown quant_method is family other, named as declared",
        {"quant_method": "HQQ", "nbits": 4},
        None,
        Quantization(family=QuantFamily.OTHER, method="hqq", weight_dtype=WeightDtype.OTHER, source="config.json"),
    ),
]


@pytest.mark.parametrize(
    ("quant_config", "hf_quant", "expected"),
    [c[1:] for c in QUANT_VARIATIONS],
    ids=[c[0] for c in QUANT_VARIATIONS],
)
def test_quantisation_variation(
    quant_config: dict[str, Any], hf_quant: dict[str, Any] | None, expected: Quantization
) -> None:
    if not quant_config:  # the compression_config case
        quant_config = load("meta-llama-3.1-8b-instruct-fp8")[0]["quantization_config"]
        assert quant_of(qwen3_config(compression_config=quant_config), hf_quant) == expected
        return
    assert quant_of(qwen3_config(quantization_config=quant_config), hf_quant) == expected


def test_unquantised_weight_dtype_follows_torch_dtype_or_dtype() -> None:
    assert quant_of(qwen3_config(torch_dtype="float16")).weight_dtype == WeightDtype.FP16
    assert quant_of(qwen3_config(torch_dtype=None, dtype="float32")).weight_dtype == WeightDtype.FP32
    assert quant_of(qwen3_config(torch_dtype=None)).weight_dtype == WeightDtype.BF16


def test_hf_quant_config_is_ignored_when_config_json_declares_quantisation() -> None:
    config, _ = load("qwen3-30b-a3b-fp8")
    modelopt = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8"}}
    assert quant_of(config, modelopt) == NATIVE_FP8_BLOCK
