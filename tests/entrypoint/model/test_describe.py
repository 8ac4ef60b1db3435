"""describe_model on the published configs of real checkpoints, plus the alias/error edge cases.

Expected descriptions are written out by hand from the model cards and config files (see
tests/fixtures/models/README.md), not computed by the code under test.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from entrypoint.model.describe import describe_model
from entrypoint.model.types import (
    ActivationScheme as Act,
)
from entrypoint.model.types import (
    Granularity as G,
)
from entrypoint.model.types import (
    ModelDescription,
    MoEShape,
    QuantFamily,
    Quantization,
    WeightDtype,
)
from entrypoint.utils.errors import ConfigError
from tests.conftest_paths import FIXTURE_MODELS

FIXTURES = FIXTURE_MODELS
FP8 = WeightDtype.FP8


def load(name: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    directory = FIXTURES / name
    hf_quant = directory / "hf_quant_config.json"
    return (
        json.loads((directory / "config.json").read_text()),
        json.loads(hf_quant.read_text()) if hf_quant.exists() else None,
    )


def fp8(family: QuantFamily, method: str, weights: G, act: Act, act_gran: G, **extra: Any) -> Quantization:
    return Quantization(
        family=family,
        method=method,
        weight_dtype=FP8,
        weight_granularity=weights,
        activation_dtype=FP8,
        activation_scheme=act,
        activation_granularity=act_gran,
        source=extra.pop("source", "config.json"),
        **extra,
    )


NATIVE_FP8_STATIC = fp8(QuantFamily.FP8, "fp8", G.TENSOR, Act.STATIC, G.TENSOR)
NATIVE_FP8_BLOCK = fp8(QuantFamily.FP8, "fp8", G.BLOCK, Act.DYNAMIC, G.GROUP, block_shape=(128, 128))
BF16 = Quantization(family=QuantFamily.UNQUANTIZED, weight_dtype=WeightDtype.BF16, source="none")

QWEN3_30B_A3B_MOE = MoEShape(
    num_experts=128, top_k=8, hidden_size=2048, expert_intermediate_size=768, num_moe_layers=48
)
MIXTRAL_MOE = MoEShape(num_experts=8, top_k=2, hidden_size=4096, expert_intermediate_size=14336, num_moe_layers=32)


def qwen3(name: str, quantization: Quantization) -> ModelDescription:
    return ModelDescription(
        source=name,
        model_type="qwen3_moe",
        architectures=("Qwen3MoeForCausalLM",),
        torch_dtype="bfloat16",
        hidden_size=2048,
        num_hidden_layers=48,
        max_position_embeddings=40960,
        moe=QWEN3_30B_A3B_MOE,
        quantization=quantization,
    )


def mixtral(name: str, torch_dtype: str, quantization: Quantization) -> ModelDescription:
    return ModelDescription(
        source=name,
        model_type="mixtral",
        architectures=("MixtralForCausalLM",),
        torch_dtype=torch_dtype,
        hidden_size=4096,
        num_hidden_layers=32,
        max_position_embeddings=32768,
        moe=MIXTRAL_MOE,
        quantization=quantization,
    )


FIXTURE_CASES: list[tuple[str, str, ModelDescription]] = [
    (
        "Mixtral-8x7B-Instruct FP8 is native fp8 with static per-tensor scales",
        "mixtral-8x7b-instruct-v0.1-fp8",
        mixtral("mixtral-8x7b-instruct-v0.1-fp8", "bfloat16", NATIVE_FP8_STATIC),
    ),
    (
        "Mixtral-8x7B-Instruct AWQ is int4 group-128 weight-only",
        "mixtral-8x7b-instruct-v0.1-awq",
        mixtral(
            "mixtral-8x7b-instruct-v0.1-awq",
            "float16",
            Quantization(
                family=QuantFamily.AWQ,
                method="awq",
                weight_dtype=WeightDtype.INT4,
                weight_granularity=G.GROUP,
                group_size=128,
                source="config.json",
            ),
        ),
    ),
    (
        "Qwen3-30B-A3B-FP8 is native fp8 with 128x128 blocks and dynamic activations",
        "qwen3-30b-a3b-fp8",
        qwen3("qwen3-30b-a3b-fp8", NATIVE_FP8_BLOCK),
    ),
    (
        "a per-tensor static native fp8 Qwen3-30B-A3B is fp8 tensor x static tensor",
        "qwen3-30b-a3b-fp8-static-synthetic",
        qwen3("qwen3-30b-a3b-fp8-static-synthetic", NATIVE_FP8_STATIC),
    ),
    (
        "Qwen3-30B-A3B BF16 is an unquantised 128-expert top-8 MoE",
        "qwen3-30b-a3b",
        qwen3("qwen3-30b-a3b", BF16),
    ),
    (
        "RedHatAI Qwen3-30B-A3B-FP8-dynamic is compressed-tensors channel x dynamic token",
        "qwen3-30b-a3b-fp8-dynamic",
        qwen3(
            "qwen3-30b-a3b-fp8-dynamic",
            fp8(QuantFamily.COMPRESSED_TENSORS, "compressed-tensors", G.CHANNEL, Act.DYNAMIC, G.TOKEN),
        ),
    ),
    (
        "a compressed-tensors FP8_BLOCK Qwen3-30B-A3B is block 128x128 x dynamic group",
        "qwen3-30b-a3b-fp8-block-synthetic",
        qwen3(
            "qwen3-30b-a3b-fp8-block-synthetic",
            fp8(
                QuantFamily.COMPRESSED_TENSORS,
                "compressed-tensors",
                G.BLOCK,
                Act.DYNAMIC,
                G.GROUP,
                block_shape=(128, 128),
            ),
        ),
    ),
    (
        "RedHatAI Qwen3-30B-A3B-NVFP4 is compressed-tensors nvfp4 group-16 weights and activations",
        "qwen3-30b-a3b-nvfp4",
        qwen3(
            "qwen3-30b-a3b-nvfp4",
            Quantization(
                family=QuantFamily.COMPRESSED_TENSORS,
                method="compressed-tensors",
                weight_dtype=WeightDtype.NVFP4,
                weight_granularity=G.GROUP,
                group_size=16,
                activation_dtype=WeightDtype.NVFP4,
                activation_scheme=Act.DYNAMIC,
                activation_granularity=G.GROUP,
                source="config.json",
            ),
        ),
    ),
    (
        "nvidia Qwen3-30B-A3B-FP4 is ModelOpt NVFP4 read from config.json before hf_quant_config.json",
        "qwen3-30b-a3b-fp4-modelopt",
        qwen3(
            "qwen3-30b-a3b-fp4-modelopt",
            Quantization(
                family=QuantFamily.MODELOPT,
                method="modelopt_fp4",
                weight_dtype=WeightDtype.NVFP4,
                weight_granularity=G.GROUP,
                group_size=16,
                activation_dtype=WeightDtype.NVFP4,
                activation_scheme=Act.DYNAMIC,
                activation_granularity=G.GROUP,
                source="config.json",
            ),
        ),
    ),
    (
        "DeepSeek-V3 is block fp8 with 256 routed experts, one shared, and 58 MoE layers",
        "deepseek-v3",
        ModelDescription(
            source="deepseek-v3",
            model_type="deepseek_v3",
            architectures=("DeepseekV3ForCausalLM",),
            torch_dtype="bfloat16",
            hidden_size=7168,
            num_hidden_layers=61,
            max_position_embeddings=163840,
            moe=MoEShape(
                num_experts=256,
                top_k=8,
                hidden_size=7168,
                expert_intermediate_size=2048,
                num_moe_layers=58,
                num_shared_experts=1,
            ),
            quantization=NATIVE_FP8_BLOCK,
        ),
    ),
    (
        "Nemotron-3-Nano-30B-A3B-FP8 is ModelOpt FP8 from hf_quant_config.json with 23 MoE layers",
        "nvidia-nemotron-3-nano-30b-a3b-fp8",
        ModelDescription(
            source="nvidia-nemotron-3-nano-30b-a3b-fp8",
            model_type="nemotron_h",
            architectures=("NemotronHForCausalLM",),
            torch_dtype="bfloat16",
            hidden_size=2688,
            num_hidden_layers=52,
            max_position_embeddings=262144,
            moe=MoEShape(
                num_experts=128,
                top_k=6,
                hidden_size=2688,
                expert_intermediate_size=1856,
                num_moe_layers=23,
                num_shared_experts=1,
            ),
            quantization=fp8(
                QuantFamily.MODELOPT, "modelopt", G.TENSOR, Act.STATIC, G.TENSOR, source="hf_quant_config.json"
            ),
        ),
    ),
    (
        "gpt-oss-120b is MXFP4 group-32 weight-only with 128 experts top-4",
        "gpt-oss-120b",
        ModelDescription(
            source="gpt-oss-120b",
            model_type="gpt_oss",
            architectures=("GptOssForCausalLM",),
            torch_dtype=None,
            hidden_size=2880,
            num_hidden_layers=36,
            max_position_embeddings=131072,
            moe=MoEShape(num_experts=128, top_k=4, hidden_size=2880, expert_intermediate_size=2880, num_moe_layers=36),
            quantization=Quantization(
                family=QuantFamily.MXFP4,
                method="mxfp4",
                weight_dtype=WeightDtype.MXFP4,
                weight_granularity=G.GROUP,
                group_size=32,
                source="config.json",
            ),
        ),
    ),
    (
        "Llama-3.1-8B-Instruct-FP8 is a dense compressed-tensors tensor x static tensor model",
        "meta-llama-3.1-8b-instruct-fp8",
        ModelDescription(
            source="meta-llama-3.1-8b-instruct-fp8",
            model_type="llama",
            architectures=("LlamaForCausalLM",),
            torch_dtype="bfloat16",
            hidden_size=4096,
            num_hidden_layers=32,
            max_position_embeddings=131072,
            moe=None,
            quantization=fp8(QuantFamily.COMPRESSED_TENSORS, "compressed-tensors", G.TENSOR, Act.STATIC, G.TENSOR),
        ),
    ),
    (
        "Llama-4-Scout reads its MoE shape from text_config and has one implicit shared expert",
        "llama-4-scout-17b-16e-instruct",
        ModelDescription(
            source="llama-4-scout-17b-16e-instruct",
            model_type="llama4",
            architectures=("Llama4ForConditionalGeneration",),
            torch_dtype="bfloat16",
            hidden_size=5120,
            num_hidden_layers=48,
            max_position_embeddings=10485760,
            moe=MoEShape(
                num_experts=16,
                top_k=1,
                hidden_size=5120,
                expert_intermediate_size=8192,
                num_moe_layers=48,
                num_shared_experts=1,
            ),
            quantization=BF16,
        ),
    ),
    (
        "Qwen1.5-MoE-A2.7B GPTQ-Int4 is int4 group-128 with a shared expert",
        "qwen1.5-moe-a2.7b-chat-gptq-int4",
        ModelDescription(
            source="qwen1.5-moe-a2.7b-chat-gptq-int4",
            model_type="qwen2_moe",
            architectures=("Qwen2MoeForCausalLM",),
            torch_dtype="float16",
            hidden_size=2048,
            num_hidden_layers=24,
            max_position_embeddings=8192,
            moe=MoEShape(
                num_experts=60,
                top_k=4,
                hidden_size=2048,
                expert_intermediate_size=1408,
                num_moe_layers=24,
                num_shared_experts=1,
            ),
            quantization=Quantization(
                family=QuantFamily.GPTQ,
                method="gptq",
                weight_dtype=WeightDtype.INT4,
                weight_granularity=G.GROUP,
                group_size=128,
                source="config.json",
            ),
        ),
    ),
]


@pytest.mark.parametrize(("fixture", "expected"), [c[1:] for c in FIXTURE_CASES], ids=[c[0] for c in FIXTURE_CASES])
def test_fixture_is_described_in_full(fixture: str, expected: ModelDescription) -> None:
    config, hf_quant = load(fixture)
    assert describe_model(config, hf_quant, source=fixture) == expected


def test_every_fixture_directory_has_a_case() -> None:
    on_disk = {p.name for p in FIXTURES.iterdir() if p.is_dir()}
    assert on_disk == {c[1] for c in FIXTURE_CASES}


def test_the_triton_rule_predicate_matches_exactly_the_static_per_tensor_fixtures() -> None:
    static = {
        name
        for _, name, _ in FIXTURE_CASES
        if describe_model(*load(name), source=name).quantization.is_fp8_per_tensor_static
    }
    assert static == {
        "mixtral-8x7b-instruct-v0.1-fp8",
        "qwen3-30b-a3b-fp8-static-synthetic",
        "nvidia-nemotron-3-nano-30b-a3b-fp8",
        "meta-llama-3.1-8b-instruct-fp8",
    }


# ------------------------------------------------------------------------------------ variations


def qwen3_config(**changes: Any) -> dict[str, Any]:
    config = copy.deepcopy(load("qwen3-30b-a3b")[0])
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    return config


def quant_of(
    config: dict[str, Any], hf_quant: dict[str, Any] | None = None, quantize: str | None = None
) -> Quantization:
    return describe_model(config, hf_quant, source="x", quantize=quantize).quantization


MOE_VARIATIONS: list[tuple[str, dict[str, Any], MoEShape | None]] = [
    ("num_experts 0 is a dense model", {"num_experts": 0}, None),
    ("num_experts null is a dense model", {"num_experts": None}, None),
    (
        "decoder_sparse_step 2 makes every second layer MoE",
        {"decoder_sparse_step": 2},
        QWEN3_30B_A3B_MOE.model_copy(update={"num_moe_layers": 24}),
    ),
    (
        "mlp_only_layers are subtracted from the MoE layers",
        {"mlp_only_layers": [0, 47]},
        QWEN3_30B_A3B_MOE.model_copy(update={"num_moe_layers": 46}),
    ),
    (
        "first_k_dense_replace and moe_layer_freq follow DeepSeek's placement",
        {"first_k_dense_replace": 2, "moe_layer_freq": 2},
        QWEN3_30B_A3B_MOE.model_copy(update={"num_moe_layers": 23}),
    ),
    (
        "a per-layer moe_topk list counts its largest value",
        {"num_experts_per_tok": None, "moe_topk": [8, 8, 8]},
        QWEN3_30B_A3B_MOE,
    ),
    (
        "n_shared_experts is carried over",
        {"n_shared_experts": 2},
        QWEN3_30B_A3B_MOE.model_copy(update={"num_shared_experts": 2}),
    ),
    (
        "without moe_intermediate_size the expert width is intermediate_size",
        {"moe_intermediate_size": None},
        QWEN3_30B_A3B_MOE.model_copy(update={"expert_intermediate_size": 6144}),
    ),
]


@pytest.mark.parametrize(("changes", "expected"), [c[1:] for c in MOE_VARIATIONS], ids=[c[0] for c in MOE_VARIATIONS])
def test_moe_shape_variation(changes: dict[str, Any], expected: MoEShape | None) -> None:
    assert describe_model(qwen3_config(**changes), None, source="x").moe == expected


def test_llama4_moe_layers_list_and_interleave_step_are_honoured() -> None:
    config, _ = load("llama-4-scout-17b-16e-instruct")
    maverick_like = copy.deepcopy(config)
    maverick_like["text_config"]["interleave_moe_layer_step"] = 2
    assert describe_model(maverick_like, None, source="x").moe.num_moe_layers == 24  # type: ignore[union-attr]
    maverick_like["text_config"]["moe_layers"] = [1, 3, 5]
    assert describe_model(maverick_like, None, source="x").moe.num_moe_layers == 3  # type: ignore[union-attr]


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


ONLINE_CASES: list[tuple[str, str, Quantization]] = [
    (
        "option.quantize fp8 on BF16 is online fp8 per-tensor with dynamic per-tensor activations",
        "fp8",
        fp8(QuantFamily.ONLINE, "fp8", G.TENSOR, Act.DYNAMIC, G.TENSOR, source="option.quantize"),
    ),
    (
        "option.quantize is case- and space-insensitive",
        " FP8 ",
        fp8(QuantFamily.ONLINE, "fp8", G.TENSOR, Act.DYNAMIC, G.TENSOR, source="option.quantize"),
    ),
    (
        "option.quantize fp8_per_block is online block fp8",
        "fp8_per_block",
        fp8(
            QuantFamily.ONLINE,
            "fp8_per_block",
            G.BLOCK,
            Act.DYNAMIC,
            G.GROUP,
            block_shape=(128, 128),
            source="option.quantize",
        ),
    ),
]


@pytest.mark.parametrize(("quantize", "expected"), [c[1:] for c in ONLINE_CASES], ids=[c[0] for c in ONLINE_CASES])
def test_online_quantisation(quantize: str, expected: Quantization) -> None:
    assert quant_of(qwen3_config(), quantize=quantize) == expected


def test_empty_option_quantize_is_ignored() -> None:
    assert quant_of(qwen3_config(), quantize="  ") == BF16


# ---------------------------------------------------------------------------------------- errors

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


def test_hf_quant_config_is_ignored_when_config_json_declares_quantisation() -> None:
    config, _ = load("qwen3-30b-a3b-fp8")
    modelopt = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8"}}
    assert quant_of(config, modelopt) == NATIVE_FP8_BLOCK


def test_nemotron_h_counts_only_the_moe_letters_of_its_layer_pattern() -> None:
    # The published pattern has as many Mamba as MoE layers, so use one where the counts differ.
    config, hf_quant = load("nvidia-nemotron-3-nano-30b-a3b-fp8")
    config = {**config, "hybrid_override_pattern": "MEM*E-MM", "num_hidden_layers": 8}
    assert describe_model(config, hf_quant, source="x").moe.num_moe_layers == 2  # type: ignore[union-attr]
