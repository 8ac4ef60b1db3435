"""A MoE backend and vLLM: which value a user may set, and how a choice reaches a given vLLM.

- `validate_user_backend`: the one check of option.moe_backend against the vLLM version, the
  checkpoint's MoE family and the GPU; a ConfigError names the key, the value and what would run.
- `render_backend_switch`: the one place that turns a chosen backend into what vLLM reads — the
  `--moe-backend` flag from vLLM 0.17, before that the era's environment variables (only three
  backends could be selected that way, PRE_017_BACKEND_ENV).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from entrypoint.config.moe import MoeBackend
from entrypoint.model.types import ModelDescription
from entrypoint.resolve.backends import backend_support, oracle_family
from entrypoint.resolve.gpu_types import GpuInventory
from entrypoint.resolve.vllm_caps import VllmCapabilities
from entrypoint.utils.errors import ConfigError

MOE_BACKEND_FLAG = "--moe-backend"
# Before 0.17 there is no --moe-backend: the era's switches (never VLLM_USE_DEEP_GEMM=1).
PRE_017_BACKEND_ENV: dict[MoeBackend, dict[str, str]] = {
    MoeBackend.TRITON: {"VLLM_USE_FLASHINFER_MOE_FP8": "0"},
    MoeBackend.FLASHINFER_CUTLASS: {"VLLM_USE_FLASHINFER_MOE_FP8": "1", "VLLM_FLASHINFER_MOE_BACKEND": "throughput"},
    MoeBackend.FLASHINFER_TRTLLM: {"VLLM_USE_FLASHINFER_MOE_FP8": "1", "VLLM_FLASHINFER_MOE_BACKEND": "latency"},
}


def selectable_backends(caps: VllmCapabilities) -> tuple[str, ...]:
    """The backend names this vLLM can be told to use at all (by flag, or by the pre-0.17 variables)."""
    if caps.has_moe_backend_arg:
        return caps.moe_backend_values
    return (MoeBackend.AUTO.value, *PRE_017_BACKEND_ENV)


def _support(backend: str, model: ModelDescription, sm: int, caps: VllmCapabilities) -> str | None:
    experts = model.moe.num_experts if model.moe else None
    return backend_support(backend, model.quantization, sm, num_experts=experts, vllm_version=caps.version)


def _accepted_backends(model: ModelDescription, sm: int, caps: VllmCapabilities) -> list[str]:
    family = oracle_family(model.quantization)
    candidates = caps.family_backends.get(family or "", caps.moe_backend_values)
    return ["auto"] + [b for b in candidates if b != "auto" and _support(b, model, sm, caps) is None]


def validate_user_backend(
    backend: MoeBackend, model: ModelDescription, gpus: GpuInventory, caps: VllmCapabilities, key: str
) -> None:
    """Raise a ConfigError unless vLLM `caps` can run `backend` for this checkpoint on these GPUs.

    `key` names the option where the user set it (Settings.option_label). A dense model has no MoE
    layer: only the name is checked there.
    """
    if backend is MoeBackend.AUTO:
        return
    value = backend.value
    if gpus.is_cpu:
        raise ConfigError(key, value, "the CPU engine has a single MoE backend", ("auto",))
    sm = gpus.sm or 0
    quant = model.quantization
    accepted = _accepted_backends(model, sm, caps)
    if value not in selectable_backends(caps):
        if not caps.has_moe_backend_arg:
            raise ConfigError(
                key,
                value,
                f"vLLM {caps.version} has no --moe-backend; only these can be selected through "
                "that era's environment variables",
                selectable_backends(caps),
            )
        close = difflib.get_close_matches(value, caps.moe_backend_values, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(key, value, f"not a vLLM {caps.version} MoE backend{hint}", accepted)
    if not model.is_moe:
        return
    family = oracle_family(quant)
    family_values = caps.family_backends.get(family or "")
    if family_values is not None and value not in family_values:
        raise ConfigError(
            key,
            value,
            f"vLLM {caps.version} does not offer it for {family} MoE ({quant.summary()})",
            accepted,
        )
    why_not = _support(value, model, sm, caps)
    if why_not:
        gpu_name = gpus.primary.name if gpus.primary else "cpu"
        raise ConfigError(key, value, f"cannot run this checkpoint on {gpu_name} (SM{sm}): {why_not}", accepted)


@dataclass(frozen=True)
class BackendSwitch:
    """What tells vLLM to use a backend: argv elements, environment variables, and the reason for the env."""

    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    reasons: tuple[str, ...] = ()


def render_backend_switch(backend: MoeBackend, caps: VllmCapabilities) -> BackendSwitch:
    """`--moe-backend X` from vLLM 0.17, the era's variables before; nothing for `auto` (vLLM decides)."""
    if backend is MoeBackend.AUTO:
        return BackendSwitch()
    if caps.has_moe_backend_arg:
        return BackendSwitch(args=(MOE_BACKEND_FLAG, backend.value))
    env = PRE_017_BACKEND_ENV.get(backend)
    if env is None:  # validate_user_backend refuses these; a rule naming one is a bug in rules.py
        raise ValueError(f"{backend} cannot be selected on vLLM {caps.version} (no --moe-backend)")
    why = f"vLLM {caps.version} has no --moe-backend: selecting {backend} through {sorted(env)}"
    return BackendSwitch(env=dict(env), reasons=(why,))
