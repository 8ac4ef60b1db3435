"""describe_model with option.quantize, online quantisation of an unquantised checkpoint
(entrypoint.model.online_quant): fp8 and fp8_per_block on the BF16 Qwen3-30B-A3B config must give the online fp8
scheme vLLM applies (per-tensor or 128x128 blocks, dynamic activations), read case- and space-insensitively, and a
blank option.quantize must leave the model unquantised. Refusals of option.quantize are in test_refused_configs.py."""

from __future__ import annotations

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
)
from tests.entrypoint.model.describe_helpers import BF16, fp8, quant_of, qwen3_config

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


# --- option.quantization, the vLLM name of option.quantize: described the same, named where it was set --------------


def _plan(model: str, environ: dict[str, str]):
    from entrypoint.inputs.gather import build_plan
    from tests.conftest_paths import REPO

    return build_plan(
        model=str(REPO / "tests/fixtures/models" / model), gpu="H200", num_gpus=1, vllm_version="0.32.0",
        environ=environ,
    )  # fmt: skip


@pytest.mark.parametrize("variable", ["OPTION_QUANTIZE", "OPTION_QUANTIZATION"])
def test_either_name_plans_the_online_scheme_vllm_will_run(variable: str) -> None:
    plan = _plan("qwen3-30b-a3b", {variable: "fp8"})
    assert any("online fp8" in reason or "online (method fp8)" in reason for reason in plan.reasons), plan.reasons
    args = list(plan.vllm_args)
    assert args[args.index("--quantization") + 1] == "fp8"


@pytest.mark.parametrize(
    ("model", "environ", "key", "fragment"),
    [
        ("qwen3-30b-a3b-fp8", {"OPTION_QUANTIZATION": "awq"}, "OPTION_QUANTIZATION (option.quantization)",
         "already quantised"),
        ("qwen3-30b-a3b", {"OPTION_QUANTIZATION": "bogus"}, "OPTION_QUANTIZATION (option.quantization)",
         "not an online quantisation"),
        ("qwen3-30b-a3b", {"HF_MODEL_QUANTIZE": "bogus"}, "HF_MODEL_QUANTIZE (option.quantize)",
         "not an online quantisation"),
    ],
    ids=["the vLLM name on a quantised checkpoint", "an unknown vLLM-name value", "the SageMaker variable"],
)  # fmt: skip
def test_a_refused_quantisation_is_named_as_the_user_set_it(model, environ, key, fragment) -> None:
    from entrypoint.utils.errors import ConfigError

    with pytest.raises(ConfigError) as caught:
        _plan(model, environ)
    assert caught.value.key == key and fragment in str(caught.value)
