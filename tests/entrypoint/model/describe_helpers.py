"""Helpers shared by the describe_model tests (test_describe, test_quant_schemes, test_online_quant and
test_refused_configs): loading a fixture checkpoint from tests/fixtures/models, building an expected fp8 scheme,
the expected schemes more than one of those files names, editing a copy of the Qwen3-30B-A3B config, and reading
the quantisation describe_model gives it. It holds no tests."""

from __future__ import annotations

import copy
import json
from typing import Any

from entrypoint.model.describe import describe_model
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


NATIVE_FP8_BLOCK = fp8(QuantFamily.FP8, "fp8", G.BLOCK, Act.DYNAMIC, G.GROUP, block_shape=(128, 128))
BF16 = Quantization(family=QuantFamily.UNQUANTIZED, weight_dtype=WeightDtype.BF16, source="none")


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
