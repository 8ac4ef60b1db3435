"""The resolver on tensor- and expert-parallel splits: the tile file each GPU reads, and block FP8 splits."""

from __future__ import annotations

import pytest

from entrypoint.config.moe import MoeBackend
from entrypoint.config_resolver import resolve
from entrypoint.model.types import (
    ModelDescription,
    MoEShape,
)
from entrypoint.model.types import (
    QuantFamily as F,
)
from entrypoint.resolve.gpu import simulate_gpus
from entrypoint.resolve.plan import PlanQuantization
from entrypoint.resolve.vllm_caps import load_snapshot
from entrypoint.utils.errors import ConfigError
from tests.entrypoint.resolver_cases import CAPS, SCHEMES, TUNED, model, settings


def test_expert_parallelism_splits_the_experts_in_the_expected_file_name():
    plan = resolve(
        settings(tensor_parallel_degree="2", enable_expert_parallel="true"),
        model("native fp8 static"),
        simulate_gpus("H200", 2),
        CAPS,
        tuned=(TUNED,),
    )
    # kernels.shapes.moe_partition: EP keeps each expert whole (N=768) and gives each GPU 128/2 experts
    assert any(
        "E=64,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json: no file for this shape in the image" in r
        for r in plan.reasons
    )


QWEN3_235B_BLOCK = ModelDescription(
    source="/models/qwen3-235b-a22b-fp8",
    moe=MoEShape(num_experts=128, top_k=8, hidden_size=4096, expert_intermediate_size=1536),
    quantization=SCHEMES["fp8 block"],
)


@pytest.mark.parametrize(
    ("options", "gpus"),
    [
        pytest.param({"tensor_parallel_degree": "4"}, 4, id="TP4 leaves 384 columns per GPU: three whole blocks"),
        pytest.param(
            {"tensor_parallel_degree": "8", "enable_expert_parallel": "true"}, 8, id="TP8 EP8 keeps experts whole"
        ),
    ],
)
def test_a_block_fp8_split_into_whole_blocks_is_planned(options: dict[str, str], gpus: int) -> None:
    plan = resolve(settings(**options), QWEN3_235B_BLOCK, simulate_gpus("H200", gpus), CAPS)
    assert plan.effective_moe_backend in ("triton", "flashinfer_cutlass")


def test_a_block_fp8_split_through_a_block_is_refused_before_vllm_026_loads_anything() -> None:
    # vLLM 0.26 fp8.py create_weights: "The output_size of gate's and up's weight = 192 is not divisible by weight
    # quantization block_n = 128" -- minutes into the start of an 8-GPU engine (Qwen3-235B-A22B-FP8 at TP8).
    with pytest.raises(ConfigError) as refused:
        resolve(
            settings(tensor_parallel_degree="8"), QWEN3_235B_BLOCK, simulate_gpus("H200", 8), load_snapshot("0.26.0")
        )
    assert refused.value.key == "option.tensor_parallel_degree" and refused.value.value == "8"
    assert "192 columns per GPU, not whole 128x128 FP8 blocks" in refused.value.reason
    assert "vLLM 0.26.0 refuses that" in refused.value.reason
    assert refused.value.accepted == "1, 2, 4, option.enable_expert_parallel=true (each GPU holds whole experts)"


def test_vllm_032_refines_the_scale_blocks_of_a_native_fp8_split_and_runs_triton() -> None:
    # 0.32 oracle/fp8.py resolve_fp8_moe_weight_block_shape: gcd(128, 128, 192, 4096) = 64 >= 32, so 64x64 scale
    # blocks (refine_fp8_moe_block_shape), which only Triton takes
    plan = resolve(settings(tensor_parallel_degree="8"), QWEN3_235B_BLOCK, simulate_gpus("H200", 8), CAPS)
    assert plan.moe_backend is MoeBackend.AUTO and plan.effective_moe_backend == "triton"
    assert plan.quantization == PlanQuantization.of(QWEN3_235B_BLOCK.quantization)  # the checkpoint's, as read
    assert (
        "block fp8 split over 8 GPUs: vLLM refines the 128x128 scale blocks to 64x64 for 192 columns per GPU; "
        "only its Triton kernel takes them (docs/resolver-rules.md)"
    ) in plan.reasons


def test_vllm_032_pads_a_native_fp8_split_for_a_backend_that_takes_128_blocks_only() -> None:
    # 0.32 pad_tp_shard_to_weight_blocks: an explicit backend that cannot take refined blocks gets 256 columns
    plan = resolve(
        settings(tensor_parallel_degree="8", moe_backend="flashinfer_cutlass"), QWEN3_235B_BLOCK,
        simulate_gpus("H200", 8), CAPS,
    )  # fmt: skip
    assert plan.moe_backend is MoeBackend.FLASHINFER_CUTLASS
    assert (
        "block fp8 split over 8 GPUs: vLLM pads each GPU's 192 expert columns to 256 (whole 128x128 blocks) "
        "(docs/resolver-rules.md)" in plan.reasons
    )


@pytest.mark.parametrize(
    ("width", "quant", "why"),
    [
        pytest.param(1440, SCHEMES["fp8 block"], "no block of at least 32 divides them", id="native, 180 columns"),
        pytest.param(1536, "ct block", "192 columns per GPU are not whole 128x128 blocks", id="compressed-tensors"),
    ],
)
def test_vllm_032_still_refuses_a_split_it_cannot_refine(width: int, quant: object, why: str) -> None:
    if quant == "ct block":
        quant = SCHEMES["fp8 block"].model_copy(update={"family": F.COMPRESSED_TENSORS, "method": "compressed-tensors"})
    described = QWEN3_235B_BLOCK.model_copy(
        update={
            "quantization": quant,
            "moe": QWEN3_235B_BLOCK.moe.model_copy(update={"expert_intermediate_size": width}),
        }
    )
    with pytest.raises(ConfigError) as refused:
        resolve(settings(tensor_parallel_degree="8"), described, simulate_gpus("H200", 8), CAPS)
    assert refused.value.key == "option.tensor_parallel_degree" and why in refused.value.reason
    assert "vLLM 0.32.0 refuses that" in refused.value.reason


def test_per_tensor_fp8_has_no_block_constraint_at_any_split() -> None:
    static = QWEN3_235B_BLOCK.model_copy(update={"quantization": SCHEMES["native fp8 static"]})
    plan = resolve(settings(tensor_parallel_degree="8"), static, simulate_gpus("H200", 8), CAPS)
    assert "--tensor-parallel-size" in plan.vllm_args and plan.moe_backend is MoeBackend.TRITON
