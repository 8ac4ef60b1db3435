"""Find vLLM's hook point, check the version, and install the dispatching experts once per process."""

from __future__ import annotations

import importlib
import inspect
import logging
from pathlib import Path

from kernels.dispatch import DISPATCH_FILE, DispatchTable

# The versions whose TritonExperts this plugin was read against (vllm/model_executor/layers/fused_moe/experts/
# triton_moe.py of the 0.26.0 and 0.32.0 wheels: apply's keyword arguments below, identical in both, and its own
# quantisation of unquantised inputs when expects_unquantized_inputs is true; 0.32's differences the plugin handles
# are in triton_experts.py: the SwiGLU clamp's new source, padding ids on by default). 0.32 is the image's vLLM;
# 0.26 stays checked, the patch being the same, for users who pin it and for the H200 host's offline 0.26 bundle,
# where `make test-gpu` passed with it. A different vLLM keeps its own kernel until someone checks it.
CHECKED_VLLM = ("0.32.", "0.26.")
HOOK_MODULE = "vllm.model_executor.layers.fused_moe.experts.triton_moe"
HOOK_CLASS = "TritonExperts"
APPLY_PARAMETERS = (
    "self", "output", "hidden_states", "w1", "w2", "topk_weights", "topk_ids", "activation", "global_num_experts",
    "expert_map", "a1q_scale", "a2_scale", "workspace13", "workspace2", "expert_tokens_meta",
    "apply_router_weight_on_input",
)  # fmt: skip
# "1": our GEMM1 launched under programmatic dependent launch behind its predecessor (MoEKernelConfig.pdl_gemm1): an
# experimental switch for comparison rows (benchmarks/e2e/backends.py plan_fold_pdl), off until an H200 measures it
GEMM1_PDL_ENV = "MOE_SERVING_GEMM1_PDL"
INSTALLED_MARK = "_moe_serving_dispatch"  # set on the class: a second register() in the process is a no-op


def vllm_version() -> str:
    import vllm

    return str(getattr(vllm, "__version__", "unknown"))


def find_hook(module_name: str = HOOK_MODULE, class_name: str = HOOK_CLASS) -> tuple[type | None, str]:
    """(the experts class, "") or (None, why it cannot be hooked)."""
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        return None, f"{module_name} does not import ({exc})"
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        return None, f"{module_name}.{class_name} is missing"
    if not isinstance(inspect.getattr_static(cls, "expects_unquantized_inputs", None), property):
        return None, f"{class_name}.expects_unquantized_inputs is not a property"
    why = signature_mismatch(cls, "apply", APPLY_PARAMETERS)
    return (None, why) if why else (cls, "")


def signature_mismatch(cls: type, method_name: str, checked: tuple[str, ...]) -> str:
    """Why `cls.method_name` is not the method this plugin was read against ("" when its parameters are `checked`)."""
    method = getattr(cls, method_name, None)
    if method is None:
        return f"{cls.__name__}.{method_name} is missing"
    names = tuple(inspect.signature(method).parameters)
    if names != checked:
        taken = ", ".join(names)
        return f"{cls.__name__}.{method_name} takes ({taken}), not the arguments this plugin was checked against"
    return ""


def install(
    table: Path | None,
    logger: logging.Logger,
    *,
    version: str | None = None,
    hook_module: str = HOOK_MODULE,
    hook_class: str = HOOK_CLASS,
    gemm1_pdl: bool = False,
) -> bool:
    """Wrap vLLM's Triton experts with the dispatch of the `table` file (None: the shipped one). True when the
    dispatch is in place after the call; False (and one log line) when vLLM's kernel stays. gemm1_pdl: see
    triton_experts.patch."""
    from entrypoint.moe_plugin import triton_experts

    version = version if version is not None else vllm_version()
    if not version.startswith(CHECKED_VLLM):
        logger.warning(
            "moe_kernel=project: vLLM %s is not a version this plugin was checked against (%s); "
            "vLLM's fused-MoE kernels run",
            version, ", ".join(f"{v}x" for v in CHECKED_VLLM),
        )  # fmt: skip
        return False
    cls, why = find_hook(hook_module, hook_class)
    if cls is None:
        logger.warning(
            "moe_kernel=project: hook point not found in vLLM %s (%s); vLLM's fused-MoE kernels run", version, why
        )
        return False
    if getattr(cls, INSTALLED_MARK, None) is not None:
        return True
    dispatch = DispatchTable.load(table or DISPATCH_FILE)
    triton_experts.patch(cls, dispatch, logger, gemm1_pdl=gemm1_pdl)
    setattr(cls, INSTALLED_MARK, dispatch.source)
    logger.info(
        "moe_kernel=project: %s.%s dispatches to ops.fused_moe_fp8 by token count (%s: %d shapes)",
        cls.__module__, cls.__name__, dispatch.source, len(dispatch.rows),
    )  # fmt: skip
    if gemm1_pdl:
        logger.info(
            "moe_kernel=project: %s=1: our first MoE GEMM launches under PDL behind the kernel before it "
            "(experimental; docs/configuration.md, experimental switches)", GEMM1_PDL_ENV,
        )  # fmt: skip
    return True
