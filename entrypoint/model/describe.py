"""Turn a checkpoint's `config.json` (and `hf_quant_config.json`) into one frozen `ModelDescription`.

Pure: no file or network access (that is `entrypoint.model.sources`). Every family-specific alias is
resolved here once, so the resolver never looks at raw config keys. The rules follow what vLLM itself
reads (paths inside the vLLM package are named where a rule copies one). This module reads the model's
shape; the quantisation comes from `quant_schemes` (what the checkpoint declares) and `online_quant`
(`option.quantize`). A wrongly typed value is a `ConfigError` naming the file and the dotted key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from entrypoint.model.config_json import CONFIG_FILE, ConfigJson
from entrypoint.model.online_quant import apply_quantize_option
from entrypoint.model.quant_schemes import checkpoint_quantization
from entrypoint.model.types import ModelDescription, MoEShape, WeightDtype
from entrypoint.utils.errors import ConfigError

# Multimodal checkpoints nest the language model's keys (Llama-4, Qwen-VL-MoE, InternVL, DeepSeek-VL2).
TEXT_CONFIG_KEYS = ("text_config", "language_config", "llm_config")
EXPERT_COUNT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
TOP_K_KEYS = ("num_experts_per_tok", "moe_topk", "experts_per_token", "num_experts_per_token", "moe_k")
# moe_intermediate_size where dense and expert widths differ (Qwen-MoE, DeepSeek, Nemotron-H);
# Mixtral-style configs (Mixtral, gpt-oss, Llama-4) only have intermediate_size, which is the expert width.
EXPERT_WIDTH_KEYS = ("moe_intermediate_size", "intermediate_size")
# Model types whose MoE block always adds one shared expert without declaring it in the config
# (transformers Llama4TextMoe.shared_expert).
IMPLICIT_SHARED_EXPERT_MODEL_TYPES = frozenset({"llama4", "llama4_text"})

DTYPE_NAMES: Mapping[str, WeightDtype] = {
    "bfloat16": WeightDtype.BF16,
    "bf16": WeightDtype.BF16,
    "float16": WeightDtype.FP16,
    "fp16": WeightDtype.FP16,
    "half": WeightDtype.FP16,
    "float32": WeightDtype.FP32,
    "fp32": WeightDtype.FP32,
    "float": WeightDtype.FP32,
}


# ---------------------------------------------------------------------------------------------- model


def describe_model(
    config: Mapping[str, Any],
    hf_quant_config: Mapping[str, Any] | None,
    *,
    source: str,
    quantize: str | None = None,
    quantize_label: str = "option.quantize",
) -> ModelDescription:
    """Normalise a checkpoint's config files.

    `quantize` is `option.quantize` (or `option.quantization`; `quantize_label` names it where the user set it):
    online quantisation of a 16-bit checkpoint at load time. It is refused on a checkpoint that is already
    quantised (LMI tells users not to set it there), unless it names the checkpoint's own method.
    """
    if not isinstance(config, Mapping):
        raise ConfigError(CONFIG_FILE, type(config).__name__, "expected a JSON object at the top level")
    top = ConfigJson(config, CONFIG_FILE)
    text = _text_config(top)
    torch_dtype = _declared_dtype(top, text)
    checkpoint = checkpoint_quantization(top, hf_quant_config, _dtype16(torch_dtype))
    architectures = config.get("architectures") or ()
    if not isinstance(architectures, list | tuple) or not all(isinstance(a, str) for a in architectures):
        raise top.fail("architectures", "a list of strings")
    model_type = top.str_("model_type")  # read here: a bad value is reported after the checks above
    return ModelDescription(
        source=source,
        model_type=model_type,
        architectures=tuple(architectures),
        torch_dtype=torch_dtype,
        hidden_size=text.int_("hidden_size", minimum=1),
        num_hidden_layers=text.int_("num_hidden_layers", minimum=1),
        max_position_embeddings=text.int_("max_position_embeddings", minimum=1),
        moe=_moe_shape(text, model_type=model_type),
        quantization=apply_quantize_option(checkpoint, quantize, quantize_label),
    )


def _text_config(top: ConfigJson) -> ConfigJson:
    for name in TEXT_CONFIG_KEYS:
        nested = top.sub(name)
        if nested is not None:
            return nested
    return top


def _declared_dtype(top: ConfigJson, text: ConfigJson) -> str | None:
    # transformers >= 4.56 writes `dtype`; older configs write `torch_dtype`.
    for reader in (top, text):
        for name in ("torch_dtype", "dtype"):
            value = reader.str_(name)
            if value is not None:
                return value
    return None


# Expert activations without a gate projection (vLLM's MoE runs them with w13 of N rows, not 2N): Nemotron-H's relu².
NON_GATED_ACTIVATIONS = frozenset({"relu2"})


def _dtype16(torch_dtype: str | None) -> WeightDtype:
    # A config without a dtype is served as bf16 by vLLM's `--dtype auto` on Hopper.
    if torch_dtype is None:
        return WeightDtype.BF16
    return DTYPE_NAMES.get(torch_dtype.lower().removeprefix("torch."), WeightDtype.OTHER)


def _moe_shape(text: ConfigJson, *, model_type: str | None) -> MoEShape | None:
    experts_key, experts = text.first(EXPERT_COUNT_KEYS, text.int_)
    if not experts:  # absent, null or 0: a dense model (Qwen2-MoE configs set num_experts=0 for dense)
        return None
    top_k_key, top_k = text.first(TOP_K_KEYS, lambda k: text.int_or_uniform_list(k, minimum=1))
    if top_k is None:
        raise ConfigError(
            text.key(top_k_key), None, f"an MoE model ({experts_key}={experts}) must set experts per token", TOP_K_KEYS
        )
    if top_k > experts:
        raise ConfigError(text.key(top_k_key), top_k, f"more experts per token than {experts_key}={experts}")
    hidden_size = text.int_("hidden_size", minimum=1)
    if hidden_size is None:
        raise ConfigError(text.key("hidden_size"), None, "an MoE model must declare hidden_size")
    width_key, width = text.first(EXPERT_WIDTH_KEYS, lambda k: text.int_or_uniform_list(k, minimum=1))
    if width is None:
        raise ConfigError(text.key(width_key), None, "an MoE model must declare its expert width", EXPERT_WIDTH_KEYS)
    return MoEShape(
        num_experts=experts,
        top_k=top_k,
        hidden_size=hidden_size,
        expert_intermediate_size=width,
        num_moe_layers=_moe_layer_count(text),
        num_shared_experts=_shared_experts(text, model_type),
        gated=(text.str_("mlp_hidden_act") or text.str_("hidden_act")) not in NON_GATED_ACTIVATIONS,
    )


def _shared_experts(text: ConfigJson, model_type: str | None) -> int:
    for name in ("n_shared_experts", "num_shared_experts"):
        if text.has(name):
            return text.int_(name) or 0
    # Qwen2-MoE: one gated shared expert whenever its width is non-zero.
    if text.int_("shared_expert_intermediate_size"):
        return 1
    if model_type in IMPLICIT_SHARED_EXPERT_MODEL_TYPES or text.str_("model_type") in (
        IMPLICIT_SHARED_EXPERT_MODEL_TYPES
    ):
        return 1
    return 0


def _moe_layer_count(text: ConfigJson) -> int | None:
    """Decoder layers whose MLP is an MoE block, by each family's own placement rule."""
    num_layers = text.int_("num_hidden_layers", minimum=1)
    pattern = text.str_("hybrid_override_pattern")
    if pattern is not None:  # Nemotron-H: one letter per layer, "E" = MoE (vllm models/nemotron_h.py)
        return pattern.count("E")
    moe_layers = text.int_list("moe_layers")
    if moe_layers is not None:  # Llama-4 writes the list out
        return len(moe_layers)
    if num_layers is None:
        return None
    first_dense = text.int_("first_k_dense_replace") or 0  # DeepSeek: the first k layers stay dense
    freq = text.int_("moe_layer_freq", minimum=1) or 1  # DeepSeek: i % freq == 0
    step = text.int_("decoder_sparse_step", minimum=1) or 1  # Qwen-MoE: (i + 1) % step == 0
    interleave = text.int_("interleave_moe_layer_step", minimum=1) or 1  # Llama-4: same rule as Qwen
    dense_only = set(text.int_list("mlp_only_layers") or ())  # Qwen-MoE: explicitly dense layers
    return sum(
        1
        for i in range(num_layers)
        if i >= first_dense
        and i % freq == 0
        and (i + 1) % step == 0
        and (i + 1) % interleave == 0
        and i not in dense_only
    )
