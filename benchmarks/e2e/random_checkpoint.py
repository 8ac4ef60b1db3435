"""A random FP8 checkpoint whose numbers mean something, for engine-level correctness checks.

vLLM's `load_format=dummy` (what the throughput rows use) fills every parameter with U(-1e-3, 1e-3). An FP8 e4m3
weight of that size rounds to 0 (the smallest subnormal is 2^-9 ≈ 1.95e-3), so with dummy weights every FP8 GEMM of
the model, the MoE experts included, outputs exactly 0, and two MoE kernels cannot disagree. Throughput does not
care (same kernels, same bytes); a comparison of logits does. This writes real safetensors instead:

- every Linear and expert weight N(0, 1/fan_in), quantised per tensor (scale = amax / 448), with a static input
  scale sized for the unit-RMS activations the normalised model feeds it (STATIC_INPUT_AMAX), so activations stay
  O(1) through the layers and the FP8 codes use their range;
- embeddings N(0, 1), norms 1, the LM head sized for logits of std LOGIT_STD (peaked enough that greedy decoding
  is not a coin toss between near-equal tokens);
- the bundled model's config with `num_hidden_layers` cut to `layers`, and the word tokenizer the benchmark uses.

Only the checkpoint format of the bundled `*-fp8-static` models is written (quant_method fp8, activation_scheme
static; Qwen3-MoE naming); anything else is refused with the reason. Deterministic for a seed.

    python -m benchmarks.e2e.random_checkpoint --model qwen3-30b-a3b-fp8-static --layers 4 --dest DIR
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.e2e import spec, tokenizer

FP8_MAX = 448.0
# The largest activation a static scale should still represent: the inputs are unit-RMS (after RMSNorm, or the
# product of two unit-variance projections for the experts' down projection), whose tails reach ~4-5.
STATIC_INPUT_AMAX = {"default": 8.0, "down_proj": 16.0}
LOGIT_STD = 4.0
MARKER = ".random-checkpoint"
GENERATOR_VERSION = "1"  # bump when anything above or in make_tensors changes what is written
# Qwen3-MoE only: its router is a Linear the fp8 config quantises (qwen3_moe.py passes quant_config to the gate);
# other families differ there (Mixtral's gate is not quantised) and would need their own naming, checked on a GPU.
ARCHITECTURES = {"Qwen3MoeForCausalLM": "qwen3_moe"}


def check_supported(config: dict[str, Any]) -> str:
    """The architecture family, or ValueError naming what is not supported."""
    arch = (config.get("architectures") or ["?"])[0]
    if arch not in ARCHITECTURES:
        raise ValueError(f"architectures={arch!r}: random checkpoints are written for {sorted(ARCHITECTURES)}")
    quant = config.get("quantization_config") or {}
    if quant.get("quant_method") != "fp8" or quant.get("activation_scheme") != "static":
        raise ValueError(
            f"quantization_config={quant}: random checkpoints are written for quant_method=fp8 with "
            "activation_scheme=static (per-tensor weight and input scales)"
        )
    return ARCHITECTURES[arch]


def tensor_specs(config: dict[str, Any], layers: int) -> Iterator[tuple[str, tuple[int, ...], str]]:
    """(name, shape, kind) of every tensor, kind ∈ embed | norm | lm_head | router | fp8 (a quantised Linear)."""
    check_supported(config)
    h, vocab = config["hidden_size"], config["vocab_size"]
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or h // heads
    experts, inter = config["num_experts"], config["moe_intermediate_size"]
    yield "model.embed_tokens.weight", (vocab, h), "embed"
    for i in range(layers):
        p = f"model.layers.{i}"
        yield f"{p}.input_layernorm.weight", (h,), "norm"
        yield f"{p}.post_attention_layernorm.weight", (h,), "norm"
        yield f"{p}.self_attn.q_proj.weight", (heads * head_dim, h), "fp8"
        yield f"{p}.self_attn.k_proj.weight", (kv_heads * head_dim, h), "fp8"
        yield f"{p}.self_attn.v_proj.weight", (kv_heads * head_dim, h), "fp8"
        yield f"{p}.self_attn.o_proj.weight", (h, heads * head_dim), "fp8"
        yield f"{p}.self_attn.q_norm.weight", (head_dim,), "norm"
        yield f"{p}.self_attn.k_norm.weight", (head_dim,), "norm"
        # the router: a Linear the fp8 config quantises too (the bundled config lists no ignored layers)
        yield f"{p}.mlp.gate.weight", (experts, h), "fp8"
        for e in range(experts):
            yield f"{p}.mlp.experts.{e}.gate_proj.weight", (inter, h), "fp8"
            yield f"{p}.mlp.experts.{e}.up_proj.weight", (inter, h), "fp8"
            yield f"{p}.mlp.experts.{e}.down_proj.weight", (h, inter), "fp8"
    yield "model.norm.weight", (h,), "norm"
    yield "lm_head.weight", (vocab, h), "lm_head"


def _input_amax(name: str) -> float:
    leaf = name.split(".")[-2]
    return STATIC_INPUT_AMAX.get(leaf, STATIC_INPUT_AMAX["default"])


def make_tensors(config: dict[str, Any], layers: int, seed: int, device: str) -> dict[str, Any]:
    """Every tensor of the checkpoint (on the CPU), scales included: {name: tensor}."""
    import torch

    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    out: dict[str, Any] = {}
    for name, shape, kind in tensor_specs(config, layers):
        if kind == "norm":
            out[name] = torch.ones(shape, dtype=torch.bfloat16)
            continue
        std = {"embed": 1.0, "lm_head": LOGIT_STD / math.sqrt(shape[1])}.get(kind, 1.0 / math.sqrt(shape[1]))
        w = torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * std
        if kind != "fp8":
            out[name] = w.to(torch.bfloat16).cpu()
            continue
        scale = w.abs().amax().clamp_min(1e-12) / FP8_MAX
        out[name] = (w / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).cpu()
        stem = name.removesuffix(".weight")
        out[f"{stem}.weight_scale"] = scale.reshape(()).to(torch.float32).cpu()
        out[f"{stem}.input_scale"] = torch.tensor(_input_amax(name) / FP8_MAX, dtype=torch.float32)
    return out


def write(model: str, layers: int, dest: Path, *, seed: int = 0, device: str | None = None) -> Path:
    """The checkpoint of `model` (a bundled name or config folder) cut to `layers`, in dest; reused when complete."""
    import torch
    from safetensors.torch import save_file

    config = spec.load_config(spec.resolve_model_dir(model))
    check_supported(config)
    if not 0 < layers <= spec.num_layers(config):
        raise ValueError(f"layers={layers}: must be between 1 and the model's {spec.num_layers(config)}")
    config = {**config, "num_hidden_layers": layers}
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    # the device is part of it: CUDA's and the CPU's generators draw different numbers for one seed
    stamp = json.dumps({"config": config, "seed": seed, "device": device, "version": GENERATOR_VERSION}, sort_keys=True)
    if (dest / MARKER).is_file() and (dest / MARKER).read_text() == stamp:
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    (dest / MARKER).unlink(missing_ok=True)
    save_file(make_tensors(config, layers, seed, device), str(dest / "model.safetensors"), metadata={"format": "pt"})
    if device.startswith("cuda"):
        torch.cuda.empty_cache()  # the engines this feeds share the GPU with this process
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    tokenizer.write_word_tokenizer(dest, int(config["vocab_size"]), int(config.get("max_position_embeddings", 32768)))
    (dest / MARKER).write_text(stamp)
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a bundled *-fp8-static model name or a config folder")
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--dest", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        path = write(args.model, args.layers, args.dest, seed=args.seed)
    except ValueError as exc:
        print(f"random_checkpoint: {exc}", file=sys.stderr)
        return 2
    print(f"random_checkpoint: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
