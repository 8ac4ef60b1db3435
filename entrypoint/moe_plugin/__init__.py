"""The vLLM general plugin that puts our fused-MoE kernel (ops.fused_moe_fp8) into the engine where it wins.

vLLM calls `register` in every process it starts (entry point group `vllm.general_plugins`, pyproject.toml). On the CPU
engine it first asks for the AMX tile permission vLLM's CPU attention needs and does not ask for (cpu_amx). Otherwise
it does nothing unless the resolver's plan set MOE_SERVING_MOE_KERNEL=project (option.moe_kernel auto or project);
then, on a vLLM it was checked against, it wraps vLLM's Triton FP8 experts (entrypoint.moe_plugin.triton_experts) so
that the token counts kernels/fused_moe_dispatch.json lists run our kernel and every other call runs vLLM's. Any other
case (another vLLM, the hook point gone, the table unreadable) leaves vLLM's kernel in place and logs one line saying
so. With MOE_SERVING_FOLD_ROUTING=1 as well, the router's top-k moves into our kernel where it runs in PAIR mode
(entrypoint.moe_plugin.fold_routing; opt-in until measured on an H200). MOE_SERVING_GEMM1_PDL=1 launches our first
GEMM under programmatic dependent launch behind the kernel before it (opt-in too, same reason).
"""

from __future__ import annotations

import logging
import os
from importlib.metadata import entry_points

from entrypoint.moe_plugin import fold_routing
from entrypoint.moe_plugin.cpu_amx import request_amx
from entrypoint.moe_plugin.hook import GEMM1_PDL_ENV, install
from kernels.dispatch import TABLE_ENV, table_path

KERNEL_ENV = "MOE_SERVING_MOE_KERNEL"  # set by the resolver (entrypoint.resolve.moe_kernel) to "project"
# How vLLM finds this plugin (pyproject.toml [project.entry-points]): installed package metadata, not a folder on
# PYTHONPATH. A checkout run from PYTHONPATH without the package installed has none, and vLLM silently loads nothing.
ENTRY_POINT_GROUP = "vllm.general_plugins"
ENTRY_POINT_NAME = "moe_serving_fused_moe"
ENTRY_POINT_TARGET = "entrypoint.moe_plugin:register"
ENTRY_POINT = f"{ENTRY_POINT_NAME} = {ENTRY_POINT_TARGET}"
# vLLM's allowlist: when set, only the general plugins it names (comma-separated) are loaded (vllm/plugins)
PLUGINS_ENV = "VLLM_PLUGINS"
__all__ = ["ENTRY_POINT", "ENTRY_POINT_GROUP", "ENTRY_POINT_NAME", "GEMM1_PDL_ENV", "KERNEL_ENV", "PLUGINS_ENV",
           "TABLE_ENV", "entry_point_installed", "register"]  # fmt: skip

# A child of vLLM's logger: vLLM gives "vllm" its handler and format in every process, so these lines reach the
# engine's log next to vLLM's own MoE lines (a logger outside that tree would drop INFO lines).
logger = logging.getLogger("vllm.moe_serving_plugin")


def entry_point_installed() -> bool:
    """Whether vLLM, started by this Python, will find and call `register` (the lookup vLLM's plugin loader does)."""
    found = entry_points(group=ENTRY_POINT_GROUP)
    return any(ep.name == ENTRY_POINT_NAME and ep.value == ENTRY_POINT_TARGET for ep in found)


def register() -> None:
    """vLLM's entry point: idempotent (vLLM may call it more than once per process), never raises."""
    try:
        request_amx(logger)
    except Exception as exc:  # never stop vLLM for it: the attention kernel then decides
        logger.warning("AMX tiles: permission not requested (%s: %s)", type(exc).__name__, exc)
    if os.environ.get(KERNEL_ENV) != "project":
        return
    try:
        gemm1_pdl = os.environ.get(GEMM1_PDL_ENV) == "1"
        if (
            install(table_path(os.environ), logger, gemm1_pdl=gemm1_pdl)
            and os.environ.get(fold_routing.FOLD_ENV) == "1"
        ):
            fold_routing.install(logger)
    except Exception as exc:  # a plugin that raises would stop vLLM: keep vLLM's kernel and say why
        logger.warning(
            "moe_kernel=project: not installed (%s: %s); vLLM's fused-MoE kernels run", type(exc).__name__, exc
        )
