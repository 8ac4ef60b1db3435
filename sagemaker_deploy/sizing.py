"""Endpoint timeouts sized from the model, so large checkpoints are not killed by SageMaker's defaults.

Formulas (seconds, clamped to [600, 3600]; 3600 is SageMaker's maximum for both settings):
  ModelDataDownloadTimeoutInSeconds           = 300 + bytes / 150 MB/s
  ContainerStartupHealthCheckTimeoutInSeconds = 600 + bytes / 200 MB/s
150 MB/s is a conservative S3 → instance-volume rate; 200 MB/s a conservative disk → GPU load
rate for the safetensors shards, and the 600 s base covers vLLM's engine start (CUDA graphs,
FlashInfer autotuning, Triton compiles when the baked cache misses) and the server's warm-up (option.warmup, cut
at MOE_WARMUP_TIMEOUT_S, 300 s by default). An unknown size gets the
maximum: a generous timeout costs only slower failure detection, a short one kills a healthy start.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from entrypoint.model.describe import describe_model
from entrypoint.model.types import ModelDescription, WeightDtype
from entrypoint.utils.errors import ConfigError

MIN_TIMEOUT_S = 600
MAX_TIMEOUT_S = 3600
DOWNLOAD_BASE_S, DOWNLOAD_BYTES_PER_S = 300, 150e6
STARTUP_BASE_S, STARTUP_BYTES_PER_S = 600, 200e6
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


@dataclass(frozen=True)
class ModelSize:
    bytes: int | None  # None: unknown
    source: str  # "s3 prefix", "local weights", "config.json estimate", "unknown"


@dataclass(frozen=True)
class Timeouts:
    download_s: int
    startup_s: int


def _clamp(seconds: float) -> int:
    return int(min(MAX_TIMEOUT_S, max(MIN_TIMEOUT_S, seconds)))


def timeouts_for(size: ModelSize) -> Timeouts:
    if size.bytes is None:
        return Timeouts(MAX_TIMEOUT_S, MAX_TIMEOUT_S)
    return Timeouts(
        download_s=_clamp(DOWNLOAD_BASE_S + size.bytes / DOWNLOAD_BYTES_PER_S),
        startup_s=_clamp(STARTUP_BASE_S + size.bytes / STARTUP_BYTES_PER_S),
    )


def local_weights_bytes(model_dir: Path) -> int | None:
    """Total size of the weight files in a local checkpoint directory, None when there are none."""
    if not model_dir.is_dir():
        return None
    sizes = [p.stat().st_size for p in model_dir.rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES]
    return sum(sizes) if sizes else None


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    nested = config.get("text_config")
    return {**config, **nested} if isinstance(nested, dict) else config


# Bytes per weight by the checkpoint's weight dtype (entrypoint.model.describe's normalised view).
_BYTES_PER_WEIGHT = {
    WeightDtype.FP32: 4.0, WeightDtype.BF16: 2.0, WeightDtype.FP16: 2.0, WeightDtype.FP8: 1.0,
    WeightDtype.INT8: 1.0, WeightDtype.NVFP4: 0.5, WeightDtype.MXFP4: 0.5, WeightDtype.INT4: 0.5,
}  # fmt: skip


def estimate_parameters(config: dict[str, Any], model: ModelDescription) -> int | None:
    """Rough parameter count of a decoder (dense, MoE or hybrid) from config.json; None when keys miss.

    embeddings (+ untied LM head) + layers x attention + MoE layers x (routed + shared experts) x 3·H·I
    + the other layers x a dense 3·H·I MLP. Good to ~10%, which is all a timeout needs; hybrid
    (Mamba) layers are counted as attention layers.
    """
    c = _text_config(config)
    try:
        hidden, layers, vocab = int(c["hidden_size"]), int(c["num_hidden_layers"]), int(c["vocab_size"])
    except (KeyError, TypeError, ValueError):
        return None
    heads = int(c.get("num_attention_heads") or 1)
    kv_heads = int(c.get("num_key_value_heads") or heads)
    head_dim = int(c.get("head_dim") or hidden // heads)
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    dense_mlp = 3 * hidden * int(c.get("intermediate_size") or 4 * hidden)
    body = layers * attention
    moe = model.moe
    if moe is None:
        body += layers * dense_mlp
    else:
        moe_layers = layers if moe.num_moe_layers is None else moe.num_moe_layers
        experts = moe.num_experts + moe.num_shared_experts
        body += moe_layers * (experts * 3 * hidden * moe.expert_intermediate_size + hidden * moe.num_experts)
        body += max(0, layers - moe_layers - str(c.get("hybrid_override_pattern") or "").count("M")) * dense_mlp
    embeddings = vocab * hidden * (1 if c.get("tie_word_embeddings") else 2)
    return body + embeddings


def size_from_config(config: dict[str, Any], hf_quant_config: dict[str, Any] | None = None) -> ModelSize:
    try:
        model = describe_model(config, hf_quant_config, source="config.json")
    except ConfigError:
        return ModelSize(None, "unknown")
    params = estimate_parameters(config, model)
    if params is None:
        return ModelSize(None, "unknown")
    per_weight = _BYTES_PER_WEIGHT.get(model.quantization.weight_dtype, 2.0)
    return ModelSize(int(params * per_weight), "config.json estimate")


def size_of_local_model(model_dir: Path) -> ModelSize:
    weights = local_weights_bytes(model_dir)
    if weights is not None:
        return ModelSize(weights, "local weights")
    config = model_dir / "config.json"
    if config.is_file():
        quant = model_dir / "hf_quant_config.json"
        return size_from_config(
            json.loads(config.read_text(encoding="utf-8")),
            json.loads(quant.read_text(encoding="utf-8")) if quant.is_file() else None,
        )
    return ModelSize(None, "unknown")
