"""The quantisation a checkpoint declares → one `Quantization`: a parser per config format vLLM reads.

Formats: native fp8, compressed-tensors, ModelOpt (config.json or the legacy hf_quant_config.json), MXFP4
(gpt-oss), GPTQ, AWQ, bitsandbytes. The rules follow what vLLM itself reads:

* `hf_quant_config.json` is consulted only when `config.json` has no `quantization_config`
  (`transformers_utils/config.py`: ModelOpt >= 0.31 writes both, and config.json wins).
* ModelOpt is recognised by `quant_method: modelopt*` or by `producer.name == "modelopt"`
  (`transformers_utils/model_arch_config_convertor.py`).
* An unknown `quant_method` is described as family OTHER (vLLM may still know it), never a crash.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from entrypoint.model.config_json import HF_QUANT_CONFIG_FILE, ConfigJson
from entrypoint.model.types import ActivationScheme, Granularity, QuantFamily, Quantization, WeightDtype
from entrypoint.utils.errors import ConfigError

FP8 = WeightDtype.FP8


def checkpoint_quantization(
    top: ConfigJson, hf_quant_config: Mapping[str, Any] | None, dtype16: WeightDtype
) -> Quantization:
    """The checkpoint's own quantisation; UNQUANTIZED with `dtype16` weights when it declares none."""
    # compressed-tensors checkpoints from before transformers' rename use `compression_config`.
    for name in ("quantization_config", "compression_config"):
        declared = top.sub(name)
        if declared is not None:
            return _declared_quantization(declared)
    if hf_quant_config is not None:
        if not isinstance(hf_quant_config, Mapping):
            raise ConfigError(HF_QUANT_CONFIG_FILE, type(hf_quant_config).__name__, "expected a JSON object")
        return _declared_quantization(ConfigJson(hf_quant_config, HF_QUANT_CONFIG_FILE))
    return Quantization(family=QuantFamily.UNQUANTIZED, weight_dtype=dtype16, source="none")


def _is_modelopt(q: ConfigJson) -> bool:
    producer = q.sub("producer")
    return producer is not None and producer.str_("name") == "modelopt"


def _declared_quantization(q: ConfigJson) -> Quantization:
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


def _native_fp8(q: ConfigJson) -> Quantization:
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


def _ct_scheme_group(q: ConfigJson) -> ConfigJson:
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


def _ct_dtype(args: ConfigJson, fmt: str, group_size: int | None) -> WeightDtype:
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


def _ct_granularity(args: ConfigJson) -> tuple[Granularity, int | None, tuple[int, int] | None]:
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


def _compressed_tensors(q: ConfigJson) -> Quantization:
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
BLOCK_FP8_DYNAMIC: dict[str, Any] = {
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
    "FP8_PB_WO": {"method": "modelopt", **BLOCK_FP8_DYNAMIC},
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


def _modelopt(q: ConfigJson) -> Quantization:
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


def _mxfp4(q: ConfigJson) -> Quantization:
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
    q: ConfigJson, family: QuantFamily, bits_keys: tuple[str, ...], group_keys: tuple[str, ...]
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


def _gptq(q: ConfigJson) -> Quantization:
    return _int_weight_only(q, QuantFamily.GPTQ, ("bits",), ("group_size",))


def _awq(q: ConfigJson) -> Quantization:
    return _int_weight_only(q, QuantFamily.AWQ, ("bits", "w_bit"), ("group_size", "q_group_size"))


def _bitsandbytes(q: ConfigJson) -> Quantization:
    eight_bit = bool(q.data.get("load_in_8bit"))
    return Quantization(
        family=QuantFamily.BITSANDBYTES,
        method="bitsandbytes",
        # 4-bit is NF4/FP4 (not an integer format); LLM.int8 scales per row.
        weight_dtype=WeightDtype.INT8 if eight_bit else WeightDtype.OTHER,
        weight_granularity=Granularity.CHANNEL if eight_bit else Granularity.GROUP,
        source=q.file,
    )


_PARSERS: Mapping[str, Callable[[ConfigJson], Quantization]] = {
    "fp8": _native_fp8,
    "compressed-tensors": _compressed_tensors,
    "modelopt": _modelopt,
    "modelopt_fp4": _modelopt,
    "mxfp4": _mxfp4,
    "gptq": _gptq,
    "awq": _awq,
    "bitsandbytes": _bitsandbytes,
}
