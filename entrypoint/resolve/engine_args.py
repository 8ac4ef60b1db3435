"""LMI options → `vllm serve` arguments. Pure: validates, renames, renders argv elements.

Values always become separate argv elements (`["--max-model-len", "4096"]`), never shell text.
The values the resolver reasons about (tensor/expert parallelism, max_num_seqs, quantization,
dtype, enforce_eager) are parsed here once into `EngineArgs`' typed fields.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from entrypoint.config.lmi_options import (
    DTYPE_NAMES,
    ENGINE_VALUES,
    LEGACY_OPTIONS,
    LMI_TO_VLLM,
    RESERVED_ARGS,
    SERVER_KEYS,
)
from entrypoint.resolve.gpu_types import GpuInventory
from entrypoint.resolve.vllm_caps import EngineArg, VllmCapabilities
from entrypoint.utils.errors import ConfigError

_BOOL_VALUES = ("true", "false")

# Integer arguments vLLM parses with human_readable_int (vllm/engine/arg_utils.py, 0.26 and 0.32):
# `25.6k` = 25600 (k/m/g/t decimal), `32K` = 32768 (K/M/G/T binary, whole numbers only).
# max_model_len also takes `auto` / `-1` (human_readable_int_or_auto). Names a vLLM lacks never reach
# _validate (they are not in its capabilities), so one set covers both versions.
_HUMAN_READABLE_INT_ARGS = frozenset(
    {
        "max_num_batched_tokens",
        "max_num_scheduled_tokens",
        "max_num_queued_tokens",  # 0.32
        "kv_cache_memory_bytes",
        "safetensors_prefetch_block_size",
    }
)
_AUTO_INT_ARGS = frozenset({"max_model_len"})
# ASCII only: vLLM's regex and int() would also take '٣', a value no one means.
_PLAIN_INT = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*")  # int()'s grammar, ASCII digits
_HUMAN_INT = re.compile(r"[0-9]+(?:\.[0-9]+)?[kmgt]|[0-9]+[KMGT]")
_INT_EXAMPLES = "a whole number in ASCII digits, e.g. 64"
_INT32_MAX = 2**31 - 1
# Ranges vLLM itself checks only once the engine builds its config (a pydantic traceback minutes into a start, or an
# argparse error): checked here so the container stops at once with exit 2 and one message. vLLM name → (low, high,
# low inclusive, what is accepted); high is inclusive. max_model_len's -1 / auto (vLLM's own length) pass before this.
_RANGES: dict[str, tuple[float, float, bool, str]] = {
    "gpu_memory_utilization": (0.0, 1.0, False, "a fraction in (0, 1], e.g. 0.9"),
    "max_model_len": (1, _INT32_MAX, True, "1 to 2147483647 tokens, -1 or auto (the model's own length)"),
    "max_num_seqs": (1, _INT32_MAX, True, "a whole number ≥ 1"),
    "max_num_batched_tokens": (1, _INT32_MAX, True, "a whole number of tokens ≥ 1"),
    "pipeline_parallel_size": (1, 1024, True, "a whole number ≥ 1"),
    "data_parallel_size": (1, 1024, True, "a whole number ≥ 1"),
    "cpu_offload_gb": (0.0, 1e6, True, "GiB ≥ 0"),
    "swap_space": (0.0, 1e6, True, "GiB ≥ 0"),
    "block_size": (1, 4096, True, "a whole number ≥ 1, e.g. 16"),
}
_HUMAN_INT_EXAMPLES = ("32768", "32k (= 32000)", "32K (= 32768)", "25.6k")
# Secret engine arguments reach vLLM through the variable it reads instead, not argv: a process's argv is readable by
# every user of the host (`ps`, /proc/PID/cmdline), its environment only by its owner. vLLM takes VLLM_API_KEY when
# --api-key is absent (entrypoints/serve/middleware/register.py); the hub client reads HF_TOKEN for every download.
SECRET_ENV: dict[str, str] = {"api_key": "VLLM_API_KEY", "hf_token": "HF_TOKEN"}


@dataclass(frozen=True)
class EngineArgs:
    """The engine flags, and the values the resolver reasons about, each parsed once."""

    args: tuple[str, ...] = ()  # flags only; the model positional is added by the resolver
    values: Mapping[str, str] = field(default_factory=dict)  # vLLM name → validated value, as passed
    ignored: tuple[str, ...] = ()  # "option.key: why"
    notes: tuple[str, ...] = ()  # reason lines (automatic decisions)
    tensor_parallel_size: int = 1
    expert_parallel: bool = False
    max_num_seqs: int | None = None  # None: vLLM's default
    quantization: str | None = None  # --quantization (option.quantize / option.quantization)
    dtype: str | None = None  # --dtype, after the LMI spellings (bf16 → bfloat16)
    enforce_eager: bool | None = None  # None: not set by the user
    env: Mapping[str, str] = field(default_factory=dict)  # secret arguments, as the variables vLLM reads (SECRET_ENV)


def _typed(
    args: list[str], values: dict[str, str], ignored: list[str], notes: list[str], env: dict[str, str]
) -> EngineArgs:
    """The validated values read into their types (validation guarantees the formats)."""

    def boolean(name: str) -> bool | None:
        return None if name not in values else values[name] == "true"

    return EngineArgs(
        args=tuple(args),
        values=dict(values),
        ignored=tuple(ignored),
        notes=tuple(notes),
        tensor_parallel_size=int(values.get("tensor_parallel_size", "1")),
        expert_parallel=boolean("enable_expert_parallel") or False,
        max_num_seqs=int(values["max_num_seqs"]) if "max_num_seqs" in values else None,
        quantization=values.get("quantization"),
        dtype=values.get("dtype"),
        enforce_eager=boolean("enforce_eager"),
        env=dict(env),
    )


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _tensor_parallel(value: str, where: str, gpus: GpuInventory) -> str:
    available = max(gpus.count, 1)
    if value.lower() in ("max", "-1"):
        return str(available)
    # one accepted list for every refusal: the sizes this machine can run (any size on the CPU engine)
    accepted = ("1", "2", "4", "8", "max") if gpus.is_cpu else [str(n) for n in range(1, gpus.count + 1)] + ["max"]
    if not (value.isascii() and value.isdigit()) or int(value) < 1:  # '²'.isdigit() is true
        raise ConfigError(where, value, "must be a positive integer or 'max'", accepted)
    if not gpus.is_cpu and int(value) > gpus.count:
        reason = f"only {gpus.count} GPU(s) visible ({gpus.primary.name})"  # type: ignore[union-attr]
        raise ConfigError(where, value, reason, accepted)
    return value


def _convert(where: str, vllm_key: str, value: str, gpus: GpuInventory) -> str:
    """LMI value semantics → vLLM value (tensor_parallel_degree=max, dtype names); `where` names the option."""
    if vllm_key == "tensor_parallel_size":
        return _tensor_parallel(value, where, gpus)
    if vllm_key == "dtype":
        dtype = DTYPE_NAMES.get(value.lower())
        if dtype is None:
            raise ConfigError(where, value, "unknown dtype", sorted(DTYPE_NAMES))
        return dtype
    return value


def _validate(key: str, value: str, spec: EngineArg, where: str) -> str:
    """Check `value` against vLLM's type for `key`; `where` is the option the user wrote (LMI name)."""
    if spec.kind == "bool":
        if value.lower() not in _BOOL_VALUES:
            raise ConfigError(where, value, "must be a boolean", _BOOL_VALUES)
        return value.lower()
    if spec.kind == "int":
        _validate_int(key, value, where)
    elif spec.kind == "float":
        try:
            number = float(value) if value.isascii() else math.nan
        except ValueError:
            number = math.nan
        if not math.isfinite(number):  # float() also takes 'nan', 'inf' and non-ASCII digits
            raise ConfigError(where, value, "must be a finite number", ("0.9", "0.85", "1e-3")) from None
    elif spec.kind == "enum":
        # vLLM parses these by member name, case-insensitive, "auto" for its own choice (AttentionConfig's validator);
        # a misspelled one would only fail in the engine, after minutes of start
        if value.lower() != "auto" and value.upper() not in spec.choices:
            close = difflib.get_close_matches(value.upper(), spec.choices, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(where, value, f"not a vLLM {key} of this version{hint}", ("auto", *spec.choices))
    elif spec.kind == "choice" and value not in spec.choices:
        # option.moe_backend never gets here: it is a typed Settings field, not one of Settings.options.
        raise ConfigError(where, value, "not an accepted value", spec.choices)
    elif spec.kind == "json" and value[:1] in "{[":
        try:
            json.loads(value)
        except json.JSONDecodeError as exc:
            # not echoed: a broken JSON option can be a connector config holding a password, and this is printed; the
            # decoder's message, line and column never quote the value and still point at the mistake
            where_wrong = f"{exc.msg} at line {exc.lineno} column {exc.colno} of its {len(value)} characters"
            raise ConfigError(where, value, f"is not valid JSON ({where_wrong})", hide_value=True) from None
    return value


_DECIMAL_UNITS = {"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_BINARY_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def _count_value(value: str) -> float | None:
    """The number a value means to vLLM: plain, or a k/m/g/t (x1000) / K/M/G/T (x1024) count as human_readable_int
    reads it (`0k` is 0, `99999999t` far past any limit); None for anything else."""
    if _HUMAN_INT.fullmatch(value):
        units = _DECIMAL_UNITS if value[-1] in _DECIMAL_UNITS else _BINARY_UNITS
        return float(value[:-1]) * units[value[-1]]
    try:
        return float(value.replace("_", ""))
    except ValueError:
        return None


def _check_range(key: str, value: str, where: str) -> None:
    """Refuse a well-formed number outside what vLLM accepts for `key` (_RANGES); other values pass unchanged."""
    bounds = _RANGES.get(key)
    if bounds is None or (key in _AUTO_INT_ARGS and value.lower() in ("auto", "-1")):
        return
    number = _count_value(value)
    if number is None:
        return  # not a number (another check names what is accepted)
    low, high, low_inclusive, accepted = bounds
    if number < low or (number == low and not low_inclusive) or number > high:
        raise ConfigError(where, value, "out of range", accepted)


def _validate_int(key: str, value: str, where: str) -> None:
    """Accept what vLLM's argparse type for this argument accepts; the value is passed on unchanged."""
    if _PLAIN_INT.fullmatch(value):
        return
    if key in _AUTO_INT_ARGS:
        if value.lower() == "auto" or _HUMAN_INT.fullmatch(value):
            return
        raise ConfigError(
            where, value, "must be an integer, a k/m/g/K/M/G count, or auto", (*_HUMAN_INT_EXAMPLES, "auto")
        )
    if key in _HUMAN_READABLE_INT_ARGS:
        if _HUMAN_INT.fullmatch(value):
            return
        raise ConfigError(where, value, "must be an integer or a k/m/g/K/M/G count", _HUMAN_INT_EXAMPLES)
    raise ConfigError(where, value, "must be an integer", _INT_EXAMPLES)


def _render(name: str, value: str, spec: EngineArg | None) -> list[str]:
    if spec is not None and spec.kind == "bool":
        return [flag(name)] if value == "true" else ["--no-" + name.replace("_", "-")]
    if value.startswith("-"):
        # vLLM's parser reads a separate element that starts with "-" as a flag of its own: `-0.5` crashes it (its
        # -O shorthand), `--served-model-name -x` is "expected one argument"; `--flag=-0.5` is read as a value
        return [f"{flag(name)}={value}"]
    return [flag(name), value]


def _twin_check(options: Mapping[str, str], gpus: GpuInventory, label: Callable[[str], str]) -> None:
    for lmi_key, vllm_key in LMI_TO_VLLM.items():
        if lmi_key in options and vllm_key in options:
            lmi_value = _convert(label(lmi_key), vllm_key, options[lmi_key], gpus)
            vllm_value = _convert(label(vllm_key), vllm_key, options[vllm_key], gpus)
            if lmi_value != vllm_value:
                raise ConfigError(
                    f"{label(lmi_key)} / {label(vllm_key)}",
                    f"{options[lmi_key]} / {options[vllm_key]}",
                    "the LMI name and its vLLM twin set different values",
                    "set only one of them, or the same value in both",
                )


def build_engine_args(
    options: Mapping[str, str],
    server: Mapping[str, str],
    caps: VllmCapabilities,
    gpus: GpuInventory,
    label: Callable[[str], str] | None = None,
) -> EngineArgs:
    """Validate every option and render the engine flags (sorted by name, so plans are stable). `label(key)` names
    an option in an error where the user set it (Settings.option_label: `TENSOR_PARALLEL_DEGREE (option....)`)."""
    label = label or (lambda key: f"option.{key}")
    args: list[str] = []
    values: dict[str, str] = {}
    ignored: list[str] = []
    notes: list[str] = []
    _twin_check(options, gpus, label)
    for key, value in server.items():
        if key == "engine" and value not in ENGINE_VALUES:
            raise ConfigError("engine", value, "unknown engine", ENGINE_VALUES)
        why = "djl-serving server setting, no vLLM meaning" if key in SERVER_KEYS else "unknown server key"
        ignored.append(f"{key}: {why}")

    chosen: dict[str, tuple[str, str]] = {}  # vLLM name → (value, LMI key it came from)
    for key in sorted(options):
        value = options[key]
        if key in ("model_id", "model"):
            continue  # the resolver's positional argument
        where = label(key)
        if key in RESERVED_ARGS:
            raise ConfigError(where, value, RESERVED_ARGS[key])
        vllm_key = LMI_TO_VLLM.get(key, key)
        value = _convert(where, vllm_key, value, gpus)  # LMI value semantics; other values unchanged
        spec = caps.engine_args.get(vllm_key)
        if spec is None:
            if key in LEGACY_OPTIONS:
                ignored.append(f"option.{key}: legacy LMI setting, not a vLLM {caps.version} engine argument")
                continue
            close = difflib.get_close_matches(vllm_key, caps.engine_args, n=1)
            hint = f" (did you mean option.{close[0]}?)" if close else ""
            ignored.append(f"option.{key}: not a vLLM {caps.version} engine argument{hint}")
            continue
        checked = _validate(vllm_key, value, spec, where)
        _check_range(vllm_key, checked, where)
        chosen[vllm_key] = (checked, key)

    env: dict[str, str] = {}
    for vllm_key in sorted(chosen):
        value, lmi_key = chosen[vllm_key]
        values[vllm_key] = value
        if vllm_key in SECRET_ENV:
            env[SECRET_ENV[vllm_key]] = value
            notes.append(
                f"option.{lmi_key} → env {SECRET_ENV[vllm_key]}, not {flag(vllm_key)}: a command line is public on "
                "the host (docs/api.md#secrets)"
            )
            continue
        args.extend(_render(vllm_key, value, caps.engine_args.get(vllm_key)))
        if lmi_key != vllm_key:
            notes.append(f"option.{lmi_key}={options[lmi_key]} → {flag(vllm_key)} {value}")
    return _typed(args, values, ignored, notes, env)
