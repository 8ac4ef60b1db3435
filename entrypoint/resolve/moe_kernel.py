"""option.moe_kernel: whose fused-MoE kernel runs inside vLLM's Triton backend — vLLM's own, or ours where it wins.

`project` means the engine plugin (entrypoint.moe_plugin) dispatches by token count to ops.fused_moe_fp8 at the M
values kernels/fused_moe_dispatch.json lists for the layer's shape on this GPU, and to vLLM's kernel everywhere else.
It needs: an FP8 MoE model with a scale kind our kernel was measured on, the Triton backend (the plugin wraps vLLM's
Triton experts), an SM90 GPU, a vLLM the plugin was checked against, and a table row for the shape. `auto` turns it on
exactly then; an explicit `project` where one of them fails is refused before anything loads; `vllm` is off.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from entrypoint.config.moe import MoeKernel
from entrypoint.config.settings import Settings
from entrypoint.model.types import ModelDescription
from entrypoint.moe_plugin import ENTRY_POINT, ENTRY_POINT_GROUP, ENTRY_POINT_NAME, KERNEL_ENV, PLUGINS_ENV
from entrypoint.moe_plugin.hook import CHECKED_VLLM
from entrypoint.resolve.backends import fp8_scheme
from entrypoint.resolve.gpu_types import GpuInventory
from entrypoint.utils.errors import ConfigError
from kernels.dispatch import DISPATCH_FILE, TABLE_ENV, DispatchKey, DispatchRow, DispatchTable
from kernels.shapes import moe_partition

OUR_KERNEL_DOC = "docs/results/our-kernel.md"  # the kernel's measurements by M, and how the table was made


@dataclass(frozen=True)
class KernelContext:
    """What the choice depends on besides the settings: the checkpoint, the GPUs, the backend vLLM will run, the
    vLLM version, the parallel split (the table is per GPU's shape) and the dispatch table."""

    model: ModelDescription
    gpus: GpuInventory
    effective_backend: str | None
    vllm_version: str
    tensor_parallel_size: int
    expert_parallel: bool
    table: DispatchTable | None
    # VLLM_USE_DEEP_GEMM / VLLM_MOE_USE_DEEP_GEMM=1 in the environment: vLLM then runs TritonOrDeepGemmExperts, whose
    # Triton fallback the prepare step feeds quantised input (the plugin keeps vLLM's kernel there)
    deep_gemm_forced: str | None = None
    # whether vLLM will find the plugin (its entry point is installed with this Python); None: not checked, the plan is
    # for another vLLM than the one installed here (e.g. sagemaker_deploy planning for the image)
    plugin_installed: bool | None = None
    # VLLM_PLUGINS of the environment the engine gets (None: unset, vLLM loads every plugin it finds)
    vllm_plugins: str | None = None


@dataclass(frozen=True)
class KernelChoice:
    kernel: MoeKernel
    reason: str
    env: dict[str, str] = field(default_factory=dict)


def _scale_kind(model: ModelDescription) -> str | None:
    quant = model.quantization
    if not quant.is_fp8:
        return None
    scheme = fp8_scheme(quant)
    if scheme.weights == "tensor" and scheme.activations == "static-tensor":
        return "tensor-static"
    if scheme.weights == "block" and quant.block_shape == (128, 128) and scheme.activations == "dynamic-group":
        return "block-dynamic"
    return None


def _project_row(ctx: KernelContext) -> tuple[DispatchRow | None, str]:
    """(the table row our kernel would use, "") or (None, why the plugin cannot run here)."""
    model, gpus, table = ctx.model, ctx.gpus, ctx.table
    moe = model.moe
    if moe is None:
        return None, "the model is dense"
    if gpus.is_cpu:
        return None, "the CPU engine runs vLLM's CPU MoE kernel"
    kind = _scale_kind(model)
    if kind is None:
        scheme = model.quantization.summary()
        # FP8: the whole line (which scale kind it is); another format by its name alone, to keep one short line
        shown = scheme if model.quantization.is_fp8 else scheme.split(":")[0]
        return None, f"ours is measured on static per-tensor or 128-block FP8 only, not {shown}"
    if ctx.deep_gemm_forced:
        return None, f"{ctx.deep_gemm_forced}=1 makes vLLM run DeepGEMM with Triton only as its fallback"
    if ctx.effective_backend != "triton":
        return None, f"the plugin replaces vLLM's Triton experts, and the MoE backend is {ctx.effective_backend}"
    if gpus.sm != 90:
        return None, f"the dispatch table holds H200 (SM90) measurements; this GPU is SM{gpus.sm}"
    if not ctx.vllm_version.startswith(CHECKED_VLLM):
        return (
            None,
            f"the plugin was checked against vLLM {', '.join(v + 'x' for v in CHECKED_VLLM)}, not {ctx.vllm_version}",
        )
    if ctx.vllm_plugins is not None and ENTRY_POINT_NAME not in ctx.vllm_plugins.split(","):
        return None, (
            f"{PLUGINS_ENV}={ctx.vllm_plugins!r} lets vLLM load only the plugins it names, not {ENTRY_POINT_NAME} "
            "(add it to the list)"
        )
    if ctx.plugin_installed is False:
        return None, (
            f"vLLM would not load the plugin: its entry point ({ENTRY_POINT_GROUP}: {ENTRY_POINT}) is not installed "
            "with this Python (install the package, e.g. pip install ., as the image does)"
        )
    if table is None:
        return None, "no dispatch table is installed (kernels/fused_moe_dispatch.json)"
    device = gpus.primary
    assert device is not None
    experts, n = moe_partition(
        moe.num_experts, moe.expert_intermediate_size, ctx.tensor_parallel_size, ctx.expert_parallel
    )
    key = DispatchKey.of(experts, n, moe.hidden_size, moe.top_k, kind, device.name)
    row = table.row(key)
    if row is None:
        return None, f"{_table_name(table)} has no M where our kernel wins for {key.label()}"
    return row, ""


def _table_name(table: DispatchTable) -> str:
    """The shipped table by its repository path (the installed path is long and says nothing); a user's in full."""
    return "kernels/fused_moe_dispatch.json" if table.source == str(DISPATCH_FILE) else table.source


# Set on every plan, not only "project": the plugin reads the variable in vLLM's processes, so one left in the
# container's environment would otherwise override a plan that chose vLLM's kernel.
_VLLM_ENV = {KERNEL_ENV: MoeKernel.VLLM.value}


def choose_moe_kernel(settings: Settings, ctx: KernelContext) -> KernelChoice:
    """The kernel choice and its one reason line; ConfigError for an explicit `project` that cannot run."""
    user = settings.moe_kernel
    if user is MoeKernel.VLLM:
        source = settings.sources.get("moe_kernel", "option.moe_kernel")
        return KernelChoice(
            MoeKernel.VLLM, f"moe_kernel: vllm (user setting from {source}): vLLM's fused-MoE kernels", dict(_VLLM_ENV)
        )
    row, why = _project_row(ctx)
    if row is None and user is MoeKernel.PROJECT:
        raise ConfigError(
            settings.option_label("moe_kernel"),
            user.value,
            f"our fused-MoE kernel cannot run here: {why}",
            (MoeKernel.AUTO.value, MoeKernel.VLLM.value),
        )
    if row is None:
        return KernelChoice(MoeKernel.VLLM, f"moe_kernel: vllm (auto: {why}; {OUR_KERNEL_DOC})", dict(_VLLM_ENV))
    origin = "user setting" if user is MoeKernel.PROJECT else "auto"
    table = ctx.table
    assert table is not None
    shipped = table.source == str(DISPATCH_FILE)
    measured = f"measured as {row.shape}" + ("" if shipped else f" in {table.source}")
    reason = (
        f"moe_kernel: project ({origin}): ours at {row.describe_ranges()} for {row.key.label()}, else vLLM's "
        f"({measured}; {OUR_KERNEL_DOC})"
    )
    env = {KERNEL_ENV: "project"}
    if not shipped:  # the plugin inside vLLM's processes reads the same table the plan read (the layer's, a user's)
        env[TABLE_ENV] = table.source
    return KernelChoice(MoeKernel.PROJECT, reason, env)
