"""Turn a checkpoint's `config.json` (and `hf_quant_config.json`) into one frozen `ModelDescription`.

Pure: no file or network access (that is `entrypoint.model.sources`). Every family-specific alias is
resolved here once, so the resolver never looks at raw config keys. The rules follow what vLLM itself
reads (paths inside the vLLM package are named where a rule copies one):

* `hf_quant_config.json` is consulted only when `config.json` has no `quantization_config`
  (`transformers_utils/config.py`: ModelOpt >= 0.31 writes both, and config.json wins).
* ModelOpt is recognised by `quant_method: modelopt*` or by `producer.name == "modelopt"`
  (`transformers_utils/model_arch_config_convertor.py`).
* A wrongly typed value is a `ConfigError` naming the file and the dotted key; an unknown
  `quant_method` is described as family OTHER (vLLM may still know it), never a crash.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from entrypoint.errors import ConfigError
from entrypoint.model.types import (
    ActivationScheme,
    Granularity,
    ModelDescription,
    MoEShape,
    QuantFamily,
    Quantization,
    WeightDtype,
)

CONFIG_FILE = "config.json"
HF_QUANT_CONFIG_FILE = "hf_quant_config.json"

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

FP8 = WeightDtype.FP8


class _Json:
    """Typed reads from one JSON object; every error names the file and the dotted key."""

    def __init__(self, data: Mapping[str, Any], file: str, path: str = ""):
        self.data = data
        self.file = file
        self.path = path

    def key(self, name: str) -> str:
        return f"{self.file}:{self.path}{name}"

    def has(self, name: str) -> bool:
        return self.data.get(name) is not None

    def _fail(self, name: str, expected: str) -> ConfigError:
        value = self.data.get(name)
        return ConfigError(self.key(name), value, f"expected {expected}, got {type(value).__name__}")

    def sub(self, name: str) -> _Json | None:
        value = self.data.get(name)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise self._fail(name, "a JSON object")
        return _Json(value, self.file, f"{self.path}{name}.")

    def str_(self, name: str) -> str | None:
        value = self.data.get(name)
        if value is None or isinstance(value, str):
            return value
        raise self._fail(name, "a string")

    def int_(self, name: str, *, minimum: int = 0) -> int | None:
        value = self.data.get(name)
        if value is None:
            return None
        # bool is an int subclass in Python; `true` is never a count.
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self._fail(name, f"an integer >= {minimum}")
        return value

    def int_list(self, name: str, *, minimum: int = 0) -> list[int] | None:
        value = self.data.get(name)
        if value is None:
            return None
        if not isinstance(value, list) or any(
            isinstance(v, bool) or not isinstance(v, int) or v < minimum for v in value
        ):
            raise self._fail(name, f"a list of integers >= {minimum}")
        return value

    def int_or_uniform_list(self, name: str, *, minimum: int = 0) -> int | None:
        """An integer, or a per-layer list of them (Hunyuan's `moe_topk`); the largest value counts."""
        if isinstance(self.data.get(name), list):
            values = self.int_list(name, minimum=minimum)
            return max(values) if values else None
        return self.int_(name, minimum=minimum)

    def first(self, names: Iterable[str], read: Callable[[str], Any]) -> tuple[str, Any]:
        """The first of several alias keys that is set: (key, value); (first key, None) when none is."""
        names = tuple(names)
        for name in names:
            if self.has(name):
                return name, read(name)
        return names[0], None


# ---------------------------------------------------------------------------------------------- model


def describe_model(
    config: Mapping[str, Any],
    hf_quant_config: Mapping[str, Any] | None,
    *,
    source: str,
    quantize: str | None = None,
) -> ModelDescription:
    """Normalise a checkpoint's config files.

    `quantize` is `option.quantize`: online quantisation of a 16-bit checkpoint at load time. It is
    refused on a checkpoint that is already quantised (LMI tells users not to set it there).
    """
    if not isinstance(config, Mapping):
        raise ConfigError(CONFIG_FILE, type(config).__name__, "expected a JSON object at the top level")
    top = _Json(config, CONFIG_FILE)
    text = _text_config(top)
    torch_dtype = _declared_dtype(top, text)
    checkpoint = _checkpoint_quantization(top, hf_quant_config, _dtype16(torch_dtype))
    architectures = config.get("architectures") or ()
    if not isinstance(architectures, list | tuple) or not all(isinstance(a, str) for a in architectures):
        raise top._fail("architectures", "a list of strings")
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
        quantization=_apply_quantize_option(checkpoint, quantize),
    )


def _text_config(top: _Json) -> _Json:
    for name in TEXT_CONFIG_KEYS:
        nested = top.sub(name)
        if nested is not None:
            return nested
    return top


def _declared_dtype(top: _Json, text: _Json) -> str | None:
    # transformers >= 4.56 writes `dtype`; older configs write `torch_dtype`.
    for reader in (top, text):
        for name in ("torch_dtype", "dtype"):
            value = reader.str_(name)
            if value is not None:
                return value
    return None


def _dtype16(torch_dtype: str | None) -> WeightDtype:
    # A config without a dtype is served as bf16 by vLLM's `--dtype auto` on Hopper.
    if torch_dtype is None:
        return WeightDtype.BF16
    return DTYPE_NAMES.get(torch_dtype.lower().removeprefix("torch."), WeightDtype.OTHER)


def _moe_shape(text: _Json, *, model_type: str | None) -> MoEShape | None:
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
    )


def _shared_experts(text: _Json, model_type: str | None) -> int:
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


def _moe_layer_count(text: _Json) -> int | None:
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


# --------------------------------------------------------------------------------------- quantisation


def _checkpoint_quantization(
    top: _Json, hf_quant_config: Mapping[str, Any] | None, dtype16: WeightDtype
) -> Quantization:
    # compressed-tensors checkpoints from before transformers' rename use `compression_config`.
    for name in ("quantization_config", "compression_config"):
        declared = top.sub(name)
        if declared is not None:
            return _declared_quantization(declared)
    if hf_quant_config is not None:
        if not isinstance(hf_quant_config, Mapping):
            raise ConfigError(HF_QUANT_CONFIG_FILE, type(hf_quant_config).__name__, "expected a JSON object")
        return _declared_quantization(_Json(hf_quant_config, HF_QUANT_CONFIG_FILE))
    return Quantization(family=QuantFamily.UNQUANTIZED, weight_dtype=dtype16, source="none")


def _is_modelopt(q: _Json) -> bool:
    producer = q.sub("producer")
    return producer is not None and producer.str_("name") == "modelopt"


def _declared_quantization(q: _Json) -> Quantization:
    method = q.str_("quant_method")
    if method is None:
        if _is_modelopt(q):
            return _modelopt(q)
        if q.data.get("load_in_4bit") or q.data.get("load_in_8bit"):
            return _bitsandbytes(q)
        raise ConfigError(q.key("quant_method"), None, "a quantisation config must name its method", sorted(_PARSERS))
    method = method.lower().replace("compressed_tensors", "compressed-tensors")
    if method.startswith("modelopt"):
        return _modelopt(q)
    parser = _PARSERS.get(method)
    if parser is None:
        # vLLM may know methods this table does not; describe, do not refuse.
        return Quantization(family=QuantFamily.OTHER, method=method, weight_dtype=WeightDtype.OTHER, source=q.file)
    return parser(q)


def _native_fp8(q: _Json) -> Quantization:
    scheme = q.str_("activation_scheme")
    if scheme not in ("static", "dynamic"):
        raise ConfigError(
            q.key("activation_scheme"),
            scheme,
            "a native fp8 checkpoint must declare its activation scheme",
            ("static", "dynamic"),
        )
    block = q.int_list("weight_block_size", minimum=1)
    if block is None:
        return Quantization(
            family=QuantFamily.FP8,
            method="fp8",
            weight_dtype=FP8,
            weight_granularity=Granularity.TENSOR,
            activation_dtype=FP8,
            activation_scheme=ActivationScheme(scheme),
            activation_granularity=Granularity.TENSOR,
            source=q.file,
        )
    if len(block) != 2:
        raise ConfigError(q.key("weight_block_size"), block, "expected two block dimensions [n, k]")
    if scheme != "dynamic":  # vLLM's Fp8Config refuses this combination at load time
        raise ConfigError(
            q.key("activation_scheme"), scheme, "block-quantised fp8 weights need dynamic activations", "dynamic"
        )
    return Quantization(
        family=QuantFamily.FP8,
        method="fp8",
        weight_dtype=FP8,
        weight_granularity=Granularity.BLOCK,
        block_shape=(block[0], block[1]),
        activation_dtype=FP8,
        activation_scheme=ActivationScheme.DYNAMIC,
        activation_granularity=Granularity.GROUP,  # 1 x k groups, quantised at run time
        source=q.file,
    )


_CT_STRATEGIES: Mapping[str, Granularity] = {
    "tensor": Granularity.TENSOR,
    "channel": Granularity.CHANNEL,
    "token": Granularity.TOKEN,
    "group": Granularity.GROUP,
    "tensor_group": Granularity.GROUP,  # NVFP4: groups of 16 under one global tensor scale
    "block": Granularity.BLOCK,
}


def _ct_scheme_group(q: _Json) -> _Json:
    """The config group that quantises the experts: one targeting experts, else Linear, else the first."""
    groups = q.sub("config_groups")
    if groups is None or not groups.data:
        raise ConfigError(q.key("config_groups"), None, "a compressed-tensors config needs config_groups")
    names = sorted(groups.data)

    def targets(name: str) -> str:
        group = groups.sub(name)
        return " ".join(str(t) for t in (group.data.get("targets") or ())) if group else ""

    for needle in ("expert", "Linear"):
        for name in names:
            if needle in targets(name):
                return groups.sub(name)  # type: ignore[return-value]
    return groups.sub(names[0])  # type: ignore[return-value]


def _ct_dtype(args: _Json, fmt: str, group_size: int | None) -> WeightDtype:
    bits = args.int_("num_bits", minimum=1)
    kind = (args.str_("type") or "int").lower()  # compressed-tensors' default type is int
    if kind == "float" and bits == 8:
        return FP8
    if kind == "float" and bits == 4:
        if "nvfp4" in fmt or group_size == 16:
            return WeightDtype.NVFP4
        if "mxfp4" in fmt or group_size == 32:
            return WeightDtype.MXFP4
    if kind == "int" and bits == 8:
        return WeightDtype.INT8
    if kind == "int" and bits == 4:
        return WeightDtype.INT4
    return WeightDtype.OTHER


def _ct_granularity(args: _Json) -> tuple[Granularity, int | None, tuple[int, int] | None]:
    group_size = args.int_("group_size", minimum=1)
    strategy = args.str_("strategy")
    if strategy is None:  # compressed-tensors infers it the same way
        strategy = "group" if group_size else "tensor"
    granularity = _CT_STRATEGIES.get(strategy)
    if granularity is None:
        raise ConfigError(args.key("strategy"), strategy, "unknown compressed-tensors strategy", _CT_STRATEGIES)
    block: tuple[int, int] | None = None
    if granularity == Granularity.BLOCK:
        raw = args.data.get("block_structure")
        if isinstance(raw, str) and "x" in raw:  # older compressed-tensors wrote "128x128"
            raw = [int(p) if p.isdigit() else p for p in raw.lower().split("x")]
        if not (isinstance(raw, list) and len(raw) == 2 and all(type(v) is int and v > 0 for v in raw)):
            raise ConfigError(args.key("block_structure"), raw, "block strategy needs [n, k]", "[128, 128]")
        block = (raw[0], raw[1])
    return granularity, group_size, block


def _compressed_tensors(q: _Json) -> Quantization:
    group = _ct_scheme_group(q)
    fmt = (group.str_("format") or q.str_("format") or "").lower()
    weights = group.sub("weights")
    if weights is None:
        raise ConfigError(group.key("weights"), None, "a compressed-tensors scheme must quantise weights")
    w_gran, w_group, block = _ct_granularity(weights)
    fields: dict[str, Any] = {
        "family": QuantFamily.COMPRESSED_TENSORS,
        "method": "compressed-tensors",
        "weight_dtype": _ct_dtype(weights, fmt, w_group),
        "weight_granularity": w_gran,
        "block_shape": block,
        "group_size": w_group if w_gran == Granularity.GROUP else None,
        "source": q.file,
    }
    acts = group.sub("input_activations")
    if acts is not None:  # None: weight-only (W4A16, W8A16)
        a_gran, a_group, _ = _ct_granularity(acts)
        dynamic = acts.data.get("dynamic", False)
        if dynamic not in (True, False, "local"):
            raise ConfigError(acts.key("dynamic"), dynamic, "unknown activation scale mode", "true, false, local")
        fields.update(
            activation_dtype=_ct_dtype(acts, fmt, a_group),
            # "local" (NVFP4): per-group scales computed at run time under a calibrated global scale.
            activation_scheme=ActivationScheme.STATIC if dynamic is False else ActivationScheme.DYNAMIC,
            activation_granularity=a_gran,
        )
    return Quantization(**fields)


# 128x128 block FP8 weights; vLLM's block-FP8 kernels quantise activations per 1x128 group at run time (ModelOpt's
# FP8_PB_WO export and vLLM's online fp8_per_block both end up here).
_BLOCK_FP8_DYNAMIC: dict[str, Any] = {
    "weight_dtype": FP8,
    "weight_granularity": Granularity.BLOCK,
    "block_shape": (128, 128),
    "activation_dtype": FP8,
    "activation_scheme": ActivationScheme.DYNAMIC,
    "activation_granularity": Granularity.GROUP,
}

_MODELOPT_ALGOS: Mapping[str, dict[str, Any]] = {
    # ModelOpt FP8: per-tensor weights and calibrated (static) per-tensor input scales.
    "FP8": {
        "method": "modelopt",
        "weight_dtype": FP8,
        "weight_granularity": Granularity.TENSOR,
        "activation_dtype": FP8,
        "activation_scheme": ActivationScheme.STATIC,
        "activation_granularity": Granularity.TENSOR,
    },
    "FP8_PER_CHANNEL_PER_TOKEN": {
        "method": "modelopt",
        "weight_dtype": FP8,
        "weight_granularity": Granularity.CHANNEL,
        "activation_dtype": FP8,
        "activation_scheme": ActivationScheme.DYNAMIC,
        "activation_granularity": Granularity.TOKEN,
    },
    "FP8_PB_WO": {"method": "modelopt", **_BLOCK_FP8_DYNAMIC},
    "NVFP4": {
        "method": "modelopt_fp4",
        "weight_dtype": WeightDtype.NVFP4,
        "weight_granularity": Granularity.GROUP,
        "group_size": 16,
        "activation_dtype": WeightDtype.NVFP4,
        "activation_scheme": ActivationScheme.DYNAMIC,
        "activation_granularity": Granularity.GROUP,
    },
    "W4A16_NVFP4": {
        "method": "modelopt_fp4",
        "weight_dtype": WeightDtype.NVFP4,
        "weight_granularity": Granularity.GROUP,
        "group_size": 16,
    },
    "MXFP8": {
        "method": "modelopt_mxfp8",
        "weight_dtype": FP8,
        "weight_granularity": Granularity.GROUP,
        "group_size": 32,
        "activation_dtype": FP8,
        "activation_scheme": ActivationScheme.DYNAMIC,
        "activation_granularity": Granularity.GROUP,
    },
    "MIXED_PRECISION": {"method": "modelopt_mixed", "weight_dtype": WeightDtype.OTHER},
}
_MODELOPT_ALIASES = {"FP8_BLOCK_SCALES": "FP8_PB_WO"}  # early block-FP8 exports (vLLM modelopt.py)


def _modelopt(q: _Json) -> Quantization:
    # Legacy hf_quant_config.json nests the algorithm under "quantization"; config.json has it at the top.
    inner = q.sub("quantization") or q
    algo_raw = inner.str_("quant_algo")
    if algo_raw is None:
        raise ConfigError(
            inner.key("quant_algo"), None, "a ModelOpt checkpoint must name its quant_algo", _MODELOPT_ALGOS
        )
    algo = algo_raw.upper()
    algo = _MODELOPT_ALIASES.get(algo, algo)
    fields = dict(_MODELOPT_ALGOS.get(algo, {"method": "modelopt", "weight_dtype": WeightDtype.OTHER}))
    if "group_size" in fields:
        fields["group_size"] = (
            inner.int_("group_size", minimum=1) or q.int_("group_size", minimum=1) or fields["group_size"]
        )
    return Quantization(family=QuantFamily.MODELOPT, source=q.file, **fields)


def _mxfp4(q: _Json) -> Quantization:
    # gpt-oss: OCP MX FP4 experts (32-element groups, e8m0 scales); activations stay 16-bit on Hopper.
    return Quantization(
        family=QuantFamily.MXFP4,
        method="mxfp4",
        weight_dtype=WeightDtype.MXFP4,
        weight_granularity=Granularity.GROUP,
        group_size=32,
        source=q.file,
    )


def _int_weight_only(
    q: _Json, family: QuantFamily, bits_keys: tuple[str, ...], group_keys: tuple[str, ...]
) -> Quantization:
    bits_key, bits = q.first(bits_keys, lambda k: q.int_(k, minimum=1))
    if bits is None:
        raise ConfigError(q.key(bits_key), None, f"a {family.value} checkpoint must declare its bit width")
    _, group = q.first(group_keys, lambda k: q.int_(k, minimum=-1))
    per_channel = group is None or group <= 0  # group_size -1 means one scale per output channel
    return Quantization(
        family=family,
        method=family.value,
        weight_dtype={4: WeightDtype.INT4, 8: WeightDtype.INT8}.get(bits, WeightDtype.OTHER),
        weight_granularity=Granularity.CHANNEL if per_channel else Granularity.GROUP,
        group_size=None if per_channel else group,
        source=q.file,
    )


def _gptq(q: _Json) -> Quantization:
    return _int_weight_only(q, QuantFamily.GPTQ, ("bits",), ("group_size",))


def _awq(q: _Json) -> Quantization:
    return _int_weight_only(q, QuantFamily.AWQ, ("bits", "w_bit"), ("group_size", "q_group_size"))


def _bitsandbytes(q: _Json) -> Quantization:
    eight_bit = bool(q.data.get("load_in_8bit"))
    return Quantization(
        family=QuantFamily.BITSANDBYTES,
        method="bitsandbytes",
        # 4-bit is NF4/FP4 (not an integer format); LLM.int8 scales per row.
        weight_dtype=WeightDtype.INT8 if eight_bit else WeightDtype.OTHER,
        weight_granularity=Granularity.CHANNEL if eight_bit else Granularity.GROUP,
        source=q.file,
    )


_PARSERS: Mapping[str, Callable[[_Json], Quantization]] = {
    "fp8": _native_fp8,
    "compressed-tensors": _compressed_tensors,
    "modelopt": _modelopt,
    "modelopt_fp4": _modelopt,
    "mxfp4": _mxfp4,
    "gptq": _gptq,
    "awq": _awq,
    "bitsandbytes": _bitsandbytes,
}


# ------------------------------------------------------------------------------- online quantisation

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
    "fp8_per_block": _BLOCK_FP8_DYNAMIC,
    "experts_int8": {"weight_dtype": WeightDtype.INT8, "weight_granularity": Granularity.CHANNEL},
    "bitsandbytes": {"weight_dtype": WeightDtype.OTHER, "weight_granularity": Granularity.GROUP},
}


def _apply_quantize_option(checkpoint: Quantization, quantize: str | None) -> Quantization:
    if quantize is None or not quantize.strip():
        return checkpoint
    name = quantize.strip().lower()
    if checkpoint.family != QuantFamily.UNQUANTIZED:
        raise ConfigError(
            "option.quantize",
            quantize,
            f"checkpoint is already quantised as {checkpoint.summary()}; remove option.quantize",
            "unset (vLLM reads the checkpoint's own scheme)",
        )
    scheme = ONLINE_SCHEMES.get(name)
    if scheme is None:
        raise ConfigError(
            "option.quantize",
            quantize,
            "not an online quantisation vLLM applies to a 16-bit checkpoint",
            ONLINE_SCHEMES,
        )
    return Quantization(family=QuantFamily.ONLINE, method=name, source="option.quantize", **scheme)
