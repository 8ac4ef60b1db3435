"""Ask Linux for the AMX tile permission in vLLM's processes on a CPU host, before vLLM's CPU attention needs it.

Linux lets a process run AMX tile instructions only after it asked (arch_prctl ARCH_REQ_XCOMP_PERM for
XFEATURE_XTILEDATA); the first tile instruction of a process that did not is a SIGILL. vLLM 0.32's CPU attention picks
its AMX kernel whenever the CPU has AMX tiles and the cache is bf16 (vllm/v1/attention/backends/cpu_attn.py
`_get_attn_isa`) but never asks; oneDNN asks when one of its bf16 GEMMs first takes the AMX path. So whether the engine
lives depends on which comes first: on a Sapphire Rapids host (2026-12-02) the EngineCore died with "Fatal Python
error: Illegal instruction" in `cpu_attention_with_kv_cache` on the compile-cache bake's first request, a 1-token
prompt, whose GEMMs took no AMX path, while sessions that began with longer prompts served. torch.cpu._init_amx() is
the request (torch/cpu/__init__.py); it is idempotent and answers whether AMX is usable.
"""

from __future__ import annotations

import logging


def on_cpu_platform() -> bool:
    """Whether this vLLM process runs the CPU engine (vLLM's platform, not a guess from the hardware)."""
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return False
    return bool(current_platform.is_cpu())


def request_amx(logger: logging.Logger) -> bool | None:
    """On the CPU engine with an AMX CPU: ask for the tile permission, log it once, return whether it was granted.
    None where it does not apply (a GPU engine, or a CPU without AMX tiles)."""
    import torch

    if not on_cpu_platform() or not torch.cpu._is_amx_tile_supported():
        return None
    granted = bool(torch.cpu._init_amx())
    if granted:
        logger.info("AMX tiles: permission requested for this process (vLLM's CPU attention uses them unasked)")
    else:
        logger.warning("AMX tiles: the kernel refused the permission; vLLM's CPU attention may die with SIGILL")
    return granted
