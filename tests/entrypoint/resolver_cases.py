"""What the resolver's tests share: the image's vLLM facts, a quantisation per scheme, a Qwen3-MoE shape, and the
settings and model builders."""

from __future__ import annotations

from entrypoint.config.settings import Settings
from entrypoint.model.types import ActivationScheme as A
from entrypoint.model.types import Granularity as G
from entrypoint.model.types import ModelDescription, MoEShape, Quantization
from entrypoint.model.types import QuantFamily as F
from entrypoint.model.types import WeightDtype as W
from entrypoint.resolve.tuned_configs import TunedConfigIndex
from entrypoint.resolve.vllm_caps import PINNED_VLLM_VERSION, load_snapshot

CAPS = load_snapshot(PINNED_VLLM_VERSION)  # the image's vLLM (0.32.0)
QWEN3_MOE = MoEShape(num_experts=128, top_k=8, hidden_size=2048, expert_intermediate_size=768)


def _fp8(family: F, method: str, weights: G, scheme: A, activations: G, **extra: object) -> Quantization:
    """An FP8 weight and activation scheme (W8A8) of one checkpoint format."""
    return Quantization(family=family, method=method, weight_dtype=W.FP8, weight_granularity=weights,
                        activation_dtype=W.FP8, activation_scheme=scheme, activation_granularity=activations,
                        **extra)  # fmt: skip


_NVFP4 = Quantization(family=F.MODELOPT, method="modelopt_fp4", weight_dtype=W.NVFP4, weight_granularity=G.GROUP,
                      activation_dtype=W.NVFP4, activation_scheme=A.DYNAMIC,
                      activation_granularity=G.GROUP)  # fmt: skip
SCHEMES = {
    "native fp8 static": _fp8(F.FP8, "fp8", G.TENSOR, A.STATIC, G.TENSOR),
    "native fp8 dynamic": _fp8(F.FP8, "fp8", G.TENSOR, A.DYNAMIC, G.TENSOR),
    "fp8 block": _fp8(F.FP8, "fp8", G.BLOCK, A.DYNAMIC, G.GROUP, block_shape=(128, 128)),
    "modelopt fp8": _fp8(F.MODELOPT, "modelopt", G.TENSOR, A.STATIC, G.TENSOR),
    "ct tensor static": _fp8(F.COMPRESSED_TENSORS, "compressed-tensors", G.TENSOR, A.STATIC, G.TENSOR),
    "ct channel token": _fp8(F.COMPRESSED_TENSORS, "compressed-tensors", G.CHANNEL, A.DYNAMIC, G.TOKEN),
    "bf16": Quantization(),
    "mxfp4": Quantization(family=F.MXFP4, method="mxfp4", weight_dtype=W.MXFP4, weight_granularity=G.GROUP),
    "nvfp4": _NVFP4,
    "gptq int4": Quantization(family=F.GPTQ, method="gptq", weight_dtype=W.INT4, weight_granularity=G.GROUP),
}


def model(scheme: str, moe: bool = True) -> ModelDescription:
    return ModelDescription(source="/models/m", moe=QWEN3_MOE if moe else None, quantization=SCHEMES[scheme])


def settings(**options: str) -> Settings:
    return Settings.from_options({"model_id": "/models/m", **options})


TUNED = TunedConfigIndex("/opt/configs", frozenset({"E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json"}))
