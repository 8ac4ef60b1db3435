"""The two options this container interprets itself, typed: option.moe_backend and option.moe_kernel.

Both are normalised once, where the settings are read (entrypoint.config.settings); everything
downstream holds a `MoeBackend` / `MoeKernel`, never the user's text. Whether a backend is
accepted by a given vLLM on a given checkpoint and GPU is the resolver's question
(entrypoint.resolve.backend_switch): here only "is it a backend name at all".
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import TypeVar

from entrypoint.utils.errors import ConfigError


class MoeBackend(StrEnum):
    """vLLM's `--moe-backend` values (the MoEBackend Literal of vLLM 0.26 and 0.32), plus `auto`.

    tests/entrypoint/config/test_moe.py checks that every committed vLLM snapshot's values are here:
    a new vLLM's names are added when its snapshot is.
    """

    AUTO = "auto"
    TRITON = "triton"
    BATCHED_TRITON = "batched_triton"
    TRITON_UNFUSED = "triton_unfused"
    DEEP_GEMM = "deep_gemm"
    DEEP_GEMM_MEGA_MOE = "deep_gemm_mega_moe"
    CUTLASS = "cutlass"
    FLASHINFER_TRTLLM = "flashinfer_trtllm"
    FLASHINFER_CUTLASS = "flashinfer_cutlass"
    FLASHINFER_CUTEDSL = "flashinfer_cutedsl"
    FLASHINFER_MOE_EP_CUTEDSL = "flashinfer_moe_ep_cutedsl"
    FLASHINFER_B12X = "flashinfer_b12x"
    FLASHINFER_MOE_EP_MEGA_DEEP_GEMM = "flashinfer_moe_ep_mega_deep_gemm"
    B12X = "b12x"
    MARLIN = "marlin"
    HUMMING = "humming"
    AITER = "aiter"
    AITER_MEGA_MOE = "aiter_mega_moe"
    AITER_TRITON_MXFP4_BF16 = "aiter_triton_mxfp4_bf16"
    FLYDSL = "flydsl"
    HPC = "hpc"
    EMULATION = "emulation"
    RDNA3 = "rdna3"


class MoeKernel(StrEnum):
    """Whose fused-MoE kernels run: vLLM's own, or ours where the dispatch table says ours wins (moe_plugin)."""

    AUTO = "auto"
    VLLM = "vllm"
    PROJECT = "project"


def normalise_name(text: str) -> str:
    """`Flashinfer-Cutlass ` → `flashinfer_cutlass`, the way vLLM folds its own option values."""
    return text.strip().lower().replace("-", "_")


E = TypeVar("E", bound=StrEnum)


def parse_choice(
    kind: type[E], text: str | None, key: str, problem: str, spellings: Mapping[str, E], also: Sequence[str]
) -> E:
    """An option naming one of ``kind``'s values, or one of ``spellings``; unset or empty is `auto`. A bad value is a
    ConfigError naming ``key``, the value, ``problem`` and what is accepted (the values, then ``also``)."""
    name = normalise_name(text or "") or "auto"
    if name in spellings:
        return spellings[name]
    try:
        return kind(name)
    except ValueError:
        raise ConfigError(key, text, problem, [value.value for value in kind] + list(also)) from None


def parse_moe_backend(text: str | None, key: str = "option.moe_backend") -> MoeBackend:
    """The user's option.moe_backend as a MoeBackend; unset or empty is `auto`. `key` names where it was set."""
    name = normalise_name(text or "") or MoeBackend.AUTO.value
    try:
        return MoeBackend(name)
    except ValueError:
        names = [backend.value for backend in MoeBackend]
        close = difflib.get_close_matches(name, names, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(key, text, f"not a vLLM MoE backend{hint}", names) from None


def parse_moe_kernel(text: str | None, key: str = "option.moe_kernel") -> MoeKernel:
    """The user's option.moe_kernel as a MoeKernel; unset or empty is `auto`."""
    name = normalise_name(text or "") or MoeKernel.AUTO.value
    try:
        return MoeKernel(name)
    except ValueError:
        raise ConfigError(key, text, "unknown value", [kernel.value for kernel in MoeKernel]) from None
