"""describe_model on the published configs of real checkpoints: every fixture directory under
tests/fixtures/models is described in full and compared with a description written out by hand from its model card
and config files (see tests/fixtures/models/README.md), not computed by the code under test; the Triton-rule
predicate is checked against those fixtures; variations of the Qwen3-30B-A3B config cover how the MoE shape is read
(expert count, top-k, shared experts, expert width, which layers are MoE), and the Llama-4 and Nemotron-H configs
how their MoE layers are counted."""

from __future__ import annotations

import copy
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
from tests.entrypoint.model.describe_helpers import BF16, FIXTURES, NATIVE_FP8_BLOCK, fp8, load, qwen3_config

NATIVE_FP8_STATIC = fp8(QuantFamily.FP8, "fp8", G.TENSOR, Act.STATIC, G.TENSOR)

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
                gated=False,  # relu² experts: up and down projections only
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


def test_nemotron_h_counts_only_the_moe_letters_of_its_layer_pattern() -> None:
    # The published pattern has as many Mamba as MoE layers, so use one where the counts differ.
    config, hf_quant = load("nvidia-nemotron-3-nano-30b-a3b-fp8")
    config = {**config, "hybrid_override_pattern": "MEM*E-MM", "num_hidden_layers": 8}
    assert describe_model(config, hf_quant, source="x").moe.num_moe_layers == 2  # type: ignore[union-attr]
