"""Endpoint timeouts sized from the model, so large checkpoints are not killed by SageMaker's defaults.

Formulas (seconds, clamped to [600, 3600]; 3600 is SageMaker's maximum for both settings):
  ModelDataDownloadTimeoutInSeconds           = 300 + bytes / 150 MB/s
  ContainerStartupHealthCheckTimeoutInSeconds = 600 + bytes / 200 MB/s
150 MB/s is a conservative S3 → instance-volume rate; 200 MB/s a conservative disk → GPU load
rate for the safetensors shards, and the 600 s base covers vLLM's engine start (CUDA graphs,
FlashInfer autotuning, Triton compiles when the baked cache misses). An unknown size gets the
maximum: a generous timeout costs only slower failure detection, a short one kills a healthy start.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def estimate_parameters(config: dict[str, Any]) -> int | None:
    """Rough parameter count of a decoder (dense or MoE) from config.json; None when keys are missing.

    embeddings (+ untied LM head) + layers × (attention + FFN), the FFN being E experts × 3·H·I
    (+ shared experts) on MoE layers. Good to ~10%, which is all a timeout needs.
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
    experts = c.get("num_local_experts") or c.get("num_experts") or c.get("n_routed_experts")
    dense_width = int(c.get("intermediate_size") or 4 * hidden)
    if experts:
        width = int(c.get("moe_intermediate_size") or dense_width)
        shared = int(c.get("n_shared_experts") or c.get("num_shared_experts") or 0)
        ffn = (int(experts) + shared) * 3 * hidden * width + hidden * int(experts)
        dense_layers = int(c.get("first_k_dense_replace") or 0)
        body = dense_layers * (attention + 3 * hidden * dense_width) + (layers - dense_layers) * (attention + ffn)
    else:
        body = layers * (attention + 3 * hidden * dense_width)
    embeddings = vocab * hidden * (1 if c.get("tie_word_embeddings") else 2)
    return body + embeddings


def bytes_per_parameter(config: dict[str, Any]) -> float:
    """1 byte for FP8 checkpoints, else from torch_dtype (2 for bf16/fp16, 4 for fp32)."""
    quant = _text_config(config).get("quantization_config") or config.get("quantization_config") or {}
    text = json.dumps(quant).lower()
    if "fp8" in text or "float8" in text or "float-quantized" in text:
        return 1.0
    if "fp4" in text or "int4" in text or "mxfp4" in text:
        return 0.5
    dtype = str(_text_config(config).get("torch_dtype") or "bfloat16")
    return 4.0 if dtype in ("float32", "fp32") else 2.0


def size_from_config(config: dict[str, Any]) -> ModelSize:
    params = estimate_parameters(config)
    if params is None:
        return ModelSize(None, "unknown")
    return ModelSize(int(params * bytes_per_parameter(config)), "config.json estimate")


def size_of_local_model(model_dir: Path) -> ModelSize:
    weights = local_weights_bytes(model_dir)
    if weights is not None:
        return ModelSize(weights, "local weights")
    config = model_dir / "config.json"
    if config.is_file():
        return size_from_config(json.loads(config.read_text(encoding="utf-8")))
    return ModelSize(None, "unknown")
