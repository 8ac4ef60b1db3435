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
