"""`option.quantize`: the quantisation vLLM applies to a 16-bit checkpoint at load time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from entrypoint.model.quant_schemes import BLOCK_FP8_DYNAMIC, FP8
from entrypoint.model.types import ActivationScheme, Granularity, QuantFamily, Quantization, WeightDtype
from entrypoint.utils.errors import ConfigError

_ONLINE_FP8_TENSOR: dict[str, Any] = {
    "weight_dtype": FP8,
    "weight_granularity": Granularity.TENSOR,
    "activation_dtype": FP8,
    "activation_scheme": ActivationScheme.DYNAMIC,
    "activation_granularity": Granularity.TENSOR,
}
# What vLLM does to a 16-bit checkpoint for each `--quantization` value it applies at load time.
# "fp8" is the LMI spelling (vLLM <= 0.26 accepts it online; later versions call it fp8_per_tensor).
ONLINE_SCHEMES: Mapping[str, dict[str, Any]] = {
    "fp8": _ONLINE_FP8_TENSOR,
    "fp8_per_tensor": _ONLINE_FP8_TENSOR,
    "fp8_per_channel": {
        "weight_dtype": FP8,
        "weight_granularity": Granularity.CHANNEL,
        "activation_dtype": FP8,
        "activation_scheme": ActivationScheme.DYNAMIC,
        "activation_granularity": Granularity.TOKEN,
    },
    "fp8_per_block": BLOCK_FP8_DYNAMIC,
    "experts_int8": {"weight_dtype": WeightDtype.INT8, "weight_granularity": Granularity.CHANNEL},
    "bitsandbytes": {"weight_dtype": WeightDtype.OTHER, "weight_granularity": Granularity.GROUP},
}


def apply_quantize_option(
    checkpoint: Quantization, quantize: str | None, where: str = "option.quantize"
) -> Quantization:
    """`checkpoint` as vLLM will serve it with `option.quantize` (or its vLLM twin `option.quantization`; `where`
    names the one the user set, as errors show it); a ConfigError on a quantised checkpoint, even one naming the
    checkpoint's own method: LMI tells users to leave it unset there, and a mismatch only fails inside vLLM."""
    if quantize is None or not quantize.strip():
        return checkpoint
    name = quantize.strip().lower()
    if checkpoint.family != QuantFamily.UNQUANTIZED:
        raise ConfigError(
            where,
            quantize,
            f"checkpoint is already quantised as {checkpoint.summary()}; remove {where.split(' ')[0]}",
            "unset (vLLM reads the checkpoint's own scheme)",
        )
    scheme = ONLINE_SCHEMES.get(name)
    if scheme is None:
        raise ConfigError(
            where, quantize, "not an online quantisation vLLM applies to a 16-bit checkpoint", ONLINE_SCHEMES
        )
    return Quantization(family=QuantFamily.ONLINE, method=name, source=where, **scheme)
