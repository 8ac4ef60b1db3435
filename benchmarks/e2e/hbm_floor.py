"""The HBM floor: the least time one decode step of an MoE model can take, from the bytes it must read from HBM.

A decode step at concurrency `conc` (each sequence produces one token) reads at least the routed experts its batch
touches in every MoE layer (`routing.expected_experts_touched`) and the shared experts, every sequence's KV cache in
every attention layer, and the dense weights every token needs (attention projections, LM head). Divided by the GPU's
HBM read bandwidth this is a floor on TPOT: a row measured under it measured something impossible (at 64 concurrent
requests, Qwen3-30B-A3B's dummy weights routed every sequence to the same few experts and gave 5.71 ms, under the
~7 ms the experts uniform routing touches take to read at 4.08 TB/s).

It must stay a LOWER bound, so where unsure it counts less, never more: no Mamba layers or SSM state, no dense MLP
layers (DeepSeek's first dense layers, Nemotron-H's "-"), no norms, router gates, biases or quantisation scales, no
embedding (its rows are gathered, not read whole), no speculative-decoding (MTP) layers; FP8 attention projections
counted at 1 byte (some may stay bf16), the LM head at 1 byte (it is usually bf16); a sliding window or attention
chunk caps the KV read of every attention layer (even of those that attend to everything).
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.e2e.routing import DEFAULT_ROUTING, ROUTINGS, check_routing, expected_experts_touched
from entrypoint.model.config_json import CONFIG_FILE, HF_QUANT_CONFIG_FILE
from entrypoint.model.describe import TEXT_CONFIG_KEYS, describe_model
from entrypoint.model.types import WeightDtype

# Bits per weight element as served. vLLM serves an fp32 checkpoint in 16 bits (--dtype auto); 4-bit formats are
# counted without their scales (a lower bound).
WEIGHT_BITS: dict[WeightDtype, int] = {
    WeightDtype.BF16: 16,
    WeightDtype.FP16: 16,
    WeightDtype.FP32: 16,
    WeightDtype.FP8: 8,
    WeightDtype.INT8: 8,
    WeightDtype.NVFP4: 4,
    WeightDtype.MXFP4: 4,
    WeightDtype.INT4: 4,
}
WIDTHS = (5, 13, 10, 7, 8, 8, 8)  # the CLI table's columns
SHARED_WIDTH_KEYS = ("moe_shared_expert_intermediate_size", "shared_expert_intermediate_size")


@dataclass(frozen=True)
class DecodeGeometry:
    """What one decode step of a model reads, in bytes or in the counts that scale with the batch.

    Expert sizes are per MoE layer (bytes of one routed expert; of all shared experts together); `dense_bytes` is the
    whole model's attention projections plus the LM head. The KV cache holds, per token and attention layer,
    `kv_tensors` × `kv_heads` × `head_dim` elements: 2 (K and V) × the KV heads × head_dim for multi-head and grouped
    attention; 1 × 1 × (kv_lora_rank + qk_rope_head_dim) for DeepSeek's MLA, which caches one joint latent."""

    moe_layers: int
    num_experts: int
    top_k: int
    expert_bytes: int
    shared_expert_bytes: int
    attention_layers: int
    kv_heads: int
    head_dim: int
    dense_bytes: int
    kv_tensors: int = 2
    attention_window: int | None = None  # sliding window / attention chunk: the most tokens a layer attends to


@dataclass(frozen=True)
class Floor:
    """Bytes one decode step must read (experts: routed and shared), and the time that takes at the given bandwidth."""

    expert_bytes: float
    kv_bytes: float
    dense_bytes: float
    bytes_total: float
    tpot_ms: float


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read it ({exc}); need the checkpoint's JSON config") from None


def geometry_from_model_dir(model_dir: Path) -> DecodeGeometry:
    """Read `config.json` (and `hf_quant_config.json`) of a model directory: the MoE shape and the weight dtype through
    the project's own parser (`describe_model`), the attention shape straight from the config (its text part where
    nested). A missing or unusable key raises ValueError naming it, the directory and what is needed."""
    model_dir = Path(model_dir)
    config = _read_json(model_dir / CONFIG_FILE)
    quant_path = model_dir / HF_QUANT_CONFIG_FILE
    description = describe_model(config, _read_json(quant_path) if quant_path.exists() else None, source=str(model_dir))
    text = next((config[k] for k in TEXT_CONFIG_KEYS if isinstance(config.get(k), dict)), config)

    def need(key: str, why: str, value: Any = None) -> int:
        value = text.get(key) if value is None else value
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{model_dir}/{CONFIG_FILE}: {key}={value!r}: need a positive integer ({why})")
        return value

    def optional(key: str) -> int | None:
        return need(key, "when set") if text.get(key) is not None else None

    moe = description.moe
    if moe is None or moe.num_moe_layers is None:
        raise ValueError(f"{model_dir}: no MoE shape (num_experts, num_experts_per_tok, ...): need an MoE checkpoint")
    bits = WEIGHT_BITS.get(description.quantization.weight_dtype)
    if bits is None:
        raise ValueError(
            f"{model_dir}: weight dtype {description.quantization.weight_dtype.value!r} (torch_dtype / "
            f"quantization_config): need one of {', '.join(d.value for d in WEIGHT_BITS)}"
        )
    hidden, width = moe.hidden_size, moe.expert_intermediate_size
    matrices = 3 if moe.gated else 2  # gate + up (w13) + down (w2), or up + down (Nemotron-H's squared ReLU)
    # The shared experts' width: per shared expert where the config names it (Nemotron-H, Qwen2-MoE), else the routed
    # experts' width (DeepSeek, Llama-4: vLLM builds moe_intermediate_size × n_shared_experts).
    shared_width = next((text[k] for k in SHARED_WIDTH_KEYS if text.get(k)), width)
    shared_width = need("shared expert width", "the shared experts' FFN width", shared_width)

    pattern = text.get("hybrid_override_pattern")
    if pattern is not None and not isinstance(pattern, str):
        raise ValueError(f"{model_dir}/{CONFIG_FILE}: hybrid_override_pattern={pattern!r}: need a string of M E * -")
    attention_layers = pattern.count("*") if pattern is not None else need("num_hidden_layers", "decoder layers")
    heads = need("num_attention_heads", "attention projections")
    if text.get("kv_lora_rank") is not None:  # DeepSeek MLA (vllm models/deepseek_v2.py)
        rank, rope = need("kv_lora_rank", "MLA latent"), need("qk_rope_head_dim", "MLA rope part")
        nope, v_dim = need("qk_nope_head_dim", "MLA query/key"), need("v_head_dim", "MLA values")
        q_rank = optional("q_lora_rank")
        q_proj = hidden * q_rank + q_rank * heads * (nope + rope) if q_rank else hidden * heads * (nope + rope)
        projections = q_proj + hidden * (rank + rope) + rank * heads * (nope + v_dim) + heads * v_dim * hidden
        kv_tensors, kv_heads, head_dim = 1, 1, rank + rope
    else:
        kv_heads = need("num_key_value_heads", "the KV cache's heads")
        head_dim = optional("head_dim") or need("hidden_size // num_attention_heads", "head_dim", hidden // heads)
        projections = hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim + heads * head_dim * hidden
        kv_tensors = 2
    lm_head = need("vocab_size", "the LM head") * hidden * min(bits, 8) // 8
    windows = [optional("attention_chunk_size")]
    if text.get("use_sliding_window") is not False:  # Qwen2-style configs keep a window they do not use
        windows.append(optional("sliding_window"))
    return DecodeGeometry(
        moe_layers=moe.num_moe_layers,
        num_experts=moe.num_experts,
        top_k=moe.top_k,
        expert_bytes=matrices * hidden * width * bits // 8,
        shared_expert_bytes=moe.num_shared_experts * matrices * hidden * shared_width * bits // 8,
        attention_layers=attention_layers,
        kv_heads=kv_heads,
        head_dim=head_dim,
        dense_bytes=attention_layers * projections * bits // 8 + lm_head,
        kv_tensors=kv_tensors,
        attention_window=min((w for w in windows if w), default=None),
    )


def decode_floor(
    geometry: DecodeGeometry,
    *,
    routing: str,
    conc: int,
    context_len: int,
    hbm_bytes_per_s: float,
    kv_bytes_per_elem: int = 2,
) -> Floor:
    """The floor of one decode step of `conc` sequences with `context_len` tokens each in the KV cache.

    For a floor over a whole request pass its shortest context (the prompt length); for a row served by several GPUs
    pass the sum of their bandwidths (every byte is read by some GPU). `kv_bytes_per_elem`: 2 for a bf16 KV cache."""
    check_routing(routing)
    if context_len < 0 or not hbm_bytes_per_s > 0 or kv_bytes_per_elem < 1:
        raise ValueError(f"context_len={context_len}, hbm_bytes_per_s={hbm_bytes_per_s}, kv={kv_bytes_per_elem}")
    g = geometry
    touched = expected_experts_touched(routing, g.num_experts, g.top_k, tokens=conc)
    experts = g.moe_layers * (touched * g.expert_bytes + g.shared_expert_bytes)
    context = min(context_len, g.attention_window) if g.attention_window else context_len
    kv = conc * context * g.attention_layers * g.kv_tensors * g.kv_heads * g.head_dim * kv_bytes_per_elem
    total = experts + kv + g.dense_bytes
    return Floor(float(experts), float(kv), float(g.dense_bytes), float(total), total / hbm_bytes_per_s * 1e3)


def floor_check(tpot_ms_median: float, floor: Floor) -> tuple[float, str]:
    """(floor ÷ measured TPOT, 'pass' | 'BELOW_FLOOR'); 'pass' when tpot >= floor; nan tpot → (nan, '').

    A ratio above 1 means the row read its weights faster than the HBM can: it did not run what it claims."""
    if math.isnan(tpot_ms_median):
        return math.nan, ""
    ratio = floor.tpot_ms / tpot_ms_median if tpot_ms_median > 0 else math.inf
    return ratio, "pass" if tpot_ms_median >= floor.tpot_ms else "BELOW_FLOOR"


def main(argv: list[str] | None = None) -> int:
    """Print the floor of a model at a few concurrencies (for docs and for checking a row by hand)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.e2e.hbm_floor", description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--routing", default=DEFAULT_ROUTING, choices=list(ROUTINGS))
    parser.add_argument("--conc", default="1,8,64", help="comma-separated concurrencies")
    parser.add_argument("--context-len", type=int, default=640, help="tokens in each sequence's KV cache")
    parser.add_argument("--hbm-tbps", type=float, required=True, help="HBM read bandwidth, TB/s (1e12 bytes/s)")
    parser.add_argument("--kv-bytes", type=int, default=2, help="bytes per KV cache element (2: bf16)")
    args = parser.parse_args(argv)
    geometry = geometry_from_model_dir(args.model_dir)
    print(f"{args.model_dir.name}: routing {args.routing}, context {args.context_len}, {args.hbm_tbps} TB/s")
    header = ("conc", "experts/layer", "experts_GB", "kv_GB", "dense_GB", "GB_read", "floor_ms")
    print(" ".join(f"{h:>{w}}" for h, w in zip(header, WIDTHS, strict=True)))
    for conc in (int(c) for c in args.conc.split(",")):
        touched = expected_experts_touched(args.routing, geometry.num_experts, geometry.top_k, tokens=conc)
        f = decode_floor(
            geometry,
            routing=args.routing,
            conc=conc,
            context_len=args.context_len,
            hbm_bytes_per_s=args.hbm_tbps * 1e12,
            kv_bytes_per_elem=args.kv_bytes,
        )
        gigabytes = (f.expert_bytes / 1e9, f.kv_bytes / 1e9, f.dense_bytes / 1e9, f.bytes_total / 1e9, f.tpot_ms)
        cells = [f"{conc:>{WIDTHS[0]}}", f"{touched:>{WIDTHS[1]}.1f}"]
        print(" ".join(cells + [f"{v:>{w}.2f}" for v, w in zip(gigabytes, WIDTHS[2:], strict=True)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
