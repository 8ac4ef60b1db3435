"""The config resolver: (settings, model, GPUs, vLLM capabilities) → one `vllm serve` plan.

A pure function: no I/O, no clock, no environment reads — everything it needs is an argument, so
the same inputs always give the same plan and every case is a table row in the tests. Order:
1. engine arguments from the LMI options (entrypoint.resolve.engine_args), typed once;
2. the MoE backend: an explicit `option.moe_backend` (validated, then it wins), else the first rule
   of entrypoint.resolve.rules that matches, else vLLM's own choice (reported, not passed);
3. how the backend reaches vLLM (entrypoint.resolve.backend_switch: the flag, or the pre-0.17 env);
4. whose fused-MoE kernel runs (entrypoint.resolve.moe_kernel: option.moe_kernel, the dispatch table);
5. environment: tuned Triton configs, era-specific variables, CPU defaults;
6. one reason line per automatic decision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from entrypoint.config.moe import MoeBackend
from entrypoint.config.settings import Settings
from entrypoint.model.types import ModelDescription, WeightDtype
from entrypoint.resolve.backend_switch import render_backend_switch, validate_user_backend
from entrypoint.resolve.backends import backend_support, fp8_block_split, fp8_scheme, predict_vllm_auto
from entrypoint.resolve.cpu_engine import cpu_engine_args
from entrypoint.resolve.cpu_parallel import CpuHost, cpu_parallel, refuse_moe_data_parallel
from entrypoint.resolve.engine_args import EngineArgs, build_engine_args
from entrypoint.resolve.gpu_types import GpuInventory
from entrypoint.resolve.moe_kernel import PLUGINS_ENV, KernelContext, choose_moe_kernel
from entrypoint.resolve.multinode import NodePlan, plan_node
from entrypoint.resolve.plan import Plan, PlanModel, PlanQuantization
from entrypoint.resolve.rules import RuleContext, first_matching_rule
from entrypoint.resolve.tuned_configs import TunedConfigIndex, tuned_config_env
from entrypoint.resolve.vllm_caps import VllmCapabilities
from entrypoint.resolve.warmup import warmup_env
from entrypoint.utils.errors import ConfigError
from entrypoint.utils.response_format import ResponseFormat
from kernels.dispatch import DispatchTable

# vLLM imports it by this path (`--middleware`); tests/entrypoint/test_config_resolver.py imports it back.
MIDDLEWARE = "entrypoint.lmi.middleware.LMIMiddleware"
# Removed in vLLM 0.24 (setting them only logs "Unknown vLLM environment variable").
LEGACY_FLASHINFER_ENV = (
    "VLLM_USE_FLASHINFER_MOE_FP8",
    "VLLM_FLASHINFER_MOE_BACKEND",
    "VLLM_USE_FLASHINFER_MOE_FP4",
)
# Set to 1 they force DeepGEMM (vLLM's fp8 oracle); the resolver refuses them on non-block FP8.
DEEP_GEMM_ENV = ("VLLM_USE_DEEP_GEMM", "VLLM_MOE_USE_DEEP_GEMM")
_CPU_REFUSED_WEIGHTS = (WeightDtype.FP8, WeightDtype.NVFP4, WeightDtype.MXFP4, WeightDtype.INT8)

RULES_DOC = "docs/resolver-rules.md"  # the rules, what vLLM picks by itself, and its block refinement


@dataclass(frozen=True)
class BackendChoice:
    passed: MoeBackend  # what vLLM is told; AUTO: nothing passed, vLLM decides
    effective: str | None  # what vLLM will run ("cpu" on the CPU engine, None for a dense model)
    source: str  # "option.moe_backend", "rule:<id>", "vllm-auto", "none"
    reason: str


def _choose_backend(
    settings: Settings, model: ModelDescription, gpus: GpuInventory, caps: VllmCapabilities, engine: EngineArgs
) -> BackendChoice:
    user = settings.moe_backend
    validate_user_backend(user, model, gpus, caps, settings.option_label("moe_backend"))
    if not model.is_moe:
        if user is not MoeBackend.AUTO:
            return BackendChoice(
                user, None, "option.moe_backend", f"moe_backend: {user} passed as set; the model is dense"
            )
        return BackendChoice(MoeBackend.AUTO, None, "none", "moe_backend: dense model, no MoE layers")
    if gpus.is_cpu:
        return BackendChoice(
            MoeBackend.AUTO, "cpu", "none", "moe_backend: CPU engine, vLLM's CPU MoE kernel is the only one"
        )
    sm = gpus.sm or 0
    experts = model.moe.num_experts if model.moe else None
    auto_backend, auto_why = predict_vllm_auto(
        model.quantization, sm, expert_parallel=engine.expert_parallel, num_experts=experts, vllm_version=caps.version
    )
    if user is not MoeBackend.AUTO:
        source = settings.sources.get("moe_backend", "option.moe_backend")
        why = f"moe_backend: {user} (user setting from {source}; vLLM alone would pick {auto_backend})"
        return BackendChoice(user, user.value, "option.moe_backend", why)
    ctx = RuleContext(model=model, sm=sm, max_num_seqs=engine.max_num_seqs, expert_parallel=engine.expert_parallel)
    rule = first_matching_rule(ctx)
    rule_support = None if rule is None else backend_support(rule.backend, model.quantization, sm, num_experts=experts)
    if rule is not None and rule_support is None:
        why = (
            f"moe_backend: {rule.backend} by rule {rule.id} (vLLM alone would pick {auto_backend}): {rule.why}; "
            f"{rule.evidence}"
        )
        return BackendChoice(rule.backend, rule.backend.value, f"rule:{rule.id}", why)
    return BackendChoice(
        MoeBackend.AUTO,
        auto_backend,
        "vllm-auto",
        f"moe_backend: not passed; vLLM will pick {auto_backend}: {auto_why} ({RULES_DOC})",
    )


def _deep_gemm_forced(environ: Mapping[str, str]) -> str | None:
    """The variable that forces DeepGEMM (set to 1), if any."""
    return next((n for n in DEEP_GEMM_ENV if environ.get(n) == "1"), None)


def _environment_checks(model: ModelDescription, caps: VllmCapabilities, environ: Mapping[str, str]) -> list[str]:
    reasons = []
    deep_gemm = _deep_gemm_forced(environ)
    if deep_gemm and model.is_moe and model.quantization.is_fp8 and fp8_scheme(model.quantization).weights != "block":
        raise ConfigError(
            deep_gemm,
            "1",
            "forces DeepGEMM, which only runs 128-block FP8; this checkpoint has "
            f"{fp8_scheme(model.quantization)} and vLLM would fail after loading the weights",
            ("0", "unset"),
        )
    if caps.legacy_flashinfer_env_removed:
        for name in LEGACY_FLASHINFER_ENV:
            if name in environ:
                reasons.append(
                    f"env {name} is ignored by vLLM {caps.version} (removed in 0.24); use option.moe_backend"
                )
    return reasons


def _check_block_fp8_split(
    settings: Settings, model: ModelDescription, engine: EngineArgs, gpus: GpuInventory, caps: VllmCapabilities
) -> tuple[ModelDescription, str | None]:
    """Refuse a TP split vLLM refuses after minutes of start (block-FP8 experts cut through a block); else the model
    as vLLM's MoE kernels will see it (vLLM 0.32 may refine the scale blocks of native fp8 checkpoints) and the
    reason line for a split vLLM adapts (entrypoint.resolve.backends.fp8_block_split)."""
    moe, quant = model.moe, model.quantization
    if moe is None or gpus.is_cpu or not quant.is_fp8 or quant.block_shape is None:
        return model, None
    width, block, tp = moe.expert_intermediate_size, quant.block_shape, engine.tensor_parallel_size

    def split(t: int, expert_parallel: bool) -> str:
        return fp8_block_split(
            quant, width, moe.hidden_size, t, expert_parallel=expert_parallel, backend=settings.moe_backend.value,
            vllm_version=caps.version,
        ).outcome  # fmt: skip

    found = fp8_block_split(
        quant, width, moe.hidden_size, tp, expert_parallel=engine.expert_parallel,
        backend=settings.moe_backend.value, vllm_version=caps.version,
    )  # fmt: skip
    if found.outcome == "refined":
        effective = model.model_copy(update={"quantization": quant.model_copy(update={"block_shape": found.block})})
        return effective, f"block fp8 split over {tp} GPUs: {found.reason} ({RULES_DOC})"
    if found.outcome == "padded":
        return model, f"block fp8 split over {tp} GPUs: {found.reason} ({RULES_DOC})"
    if found.outcome == "fits":
        return model, None
    key = "tensor_parallel_degree" if "tensor_parallel_degree" in settings.options else "tensor_parallel_size"
    fits = [str(t) for t in (1, 2, 4, 8) if t <= max(gpus.count, 1) and split(t, False) != "refused"]
    if not engine.expert_parallel and split(tp, True) != "refused":
        fits.append("option.enable_expert_parallel=true (each GPU holds whole experts)")
    raise ConfigError(
        settings.option_label(key),
        str(tp),
        f"the checkpoint's {width}-wide experts split {tp} ways leave {width // tp} columns per GPU, not whole "
        f"{block[0]}x{block[1]} FP8 blocks ({found.reason}); vLLM {caps.version} refuses that when it creates the "
        "MoE weights",
        fits,
    )


def _cpu_parallel(
    settings: Settings,
    model: ModelDescription,
    engine: EngineArgs,
    node: NodePlan,
    host: CpuHost | None,
    environ: Mapping[str, str],
) -> tuple[dict[str, str], tuple[str, ...]]:
    """The CPU engine's binding and shared-memory check for its worker processes (entrypoint.resolve.cpu_parallel)."""
    if model.is_moe and node.dp_size > 1:
        from_option = "data_parallel_size" in engine.values
        dp_key = settings.option_label("data_parallel_size") if from_option else "LWS_GROUP_SIZE"
        refuse_moe_data_parallel(node.dp_size, dp_key)
    pipeline = int(engine.values.get("pipeline_parallel_size", "1"))
    ranks = engine.tensor_parallel_size * pipeline * node.dp_local
    if engine.tensor_parallel_size > 1 or node.dp_size <= 1:
        name = "tensor_parallel_degree" if "tensor_parallel_degree" in settings.options else "tensor_parallel_size"
        value = str(engine.tensor_parallel_size)
    else:
        name, value = "data_parallel_size", str(node.dp_size)
    found = cpu_parallel(ranks, node.dp_size, engine.expert_parallel, host, environ, settings.option_label(name), value)
    return found.env, found.reasons


def resolve(
    settings: Settings,
    model: ModelDescription,
    gpus: GpuInventory,
    caps: VllmCapabilities,
    *,
    environ: Mapping[str, str] | None = None,
    tuned: Sequence[TunedConfigIndex] = (),
    dispatch: DispatchTable | None = None,
    context_reasons: tuple[str, ...] = (),
    plugin_installed: bool | None = None,
    host: CpuHost | None = None,
) -> Plan:
    """Decide the vLLM command line. Raises ConfigError for anything vLLM would refuse later.

    `host`: the CPUs and /dev/shm this process sees (entrypoint.inputs.host), for the CPU engine's workers; None plans
    no CPU binding and checks no shared memory."""
    environ = environ or {}
    if gpus.is_cpu and model.quantization.weight_dtype in _CPU_REFUSED_WEIGHTS:
        raise ConfigError(
            "model",
            model.source,
            f"{model.quantization.summary()} cannot run on the CPU engine (the CPU build has no "
            "FP8/FP4/INT8 MoE kernels for this processor); run it on an NVIDIA GPU, "
            "or serve a BF16 checkpoint",
        )
    engine = build_engine_args(settings.options, settings.server, caps, gpus, settings.option_label)
    # `kernels_model`: the checkpoint as vLLM's MoE kernels get it (refined scale blocks); the plan reports `model`
    kernels_model, split_reason = _check_block_fp8_split(settings, model, engine, gpus, caps)
    reasons = [*context_reasons, *engine.notes]
    if split_reason:
        reasons.append(split_reason)
    choice = _choose_backend(settings, kernels_model, gpus, caps, engine)
    switch = render_backend_switch(choice.passed, caps)
    reasons += [choice.reason, *switch.reasons]
    env = {**switch.env, **engine.env}
    if choice.effective == "triton" and model.quantization.is_fp8 and not gpus.is_cpu:
        tuned_env, tuned_reasons = tuned_config_env(kernels_model, gpus, engine, tuned, environ)
        env.update(tuned_env)
        reasons += tuned_reasons
    deep_gemm = _deep_gemm_forced(environ)
    context = KernelContext(
        kernels_model, gpus, choice.effective, caps.version, engine.tensor_parallel_size, engine.expert_parallel,
        dispatch, deep_gemm, plugin_installed, environ.get(PLUGINS_ENV),
    )  # fmt: skip
    kernel = choose_moe_kernel(settings, context)
    env.update(kernel.env)
    reasons.append(kernel.reason)
    reasons += _environment_checks(model, caps, environ)

    node = plan_node(settings, engine, gpus, environ)
    reasons += node.reasons
    extra_args: list[str] = []
    if gpus.is_cpu:
        extra_args, cpu_reasons = cpu_engine_args(engine, caps)
        reasons += cpu_reasons
        parallel_env, parallel_reasons = _cpu_parallel(settings, model, engine, node, host, environ)
        env.update(parallel_env)
        reasons += parallel_reasons
    # the warm-up counts the API servers of every data-parallel engine, also those the node role added
    counted = replace(engine, values={**engine.values, "data_parallel_size": str(node.dp_size)})
    warmup, warmup_reason = warmup_env(settings, gpus, counted, headless=node.headless)
    env.update(warmup)
    reasons.append(warmup_reason)
    env.update(settings.response_format.env())
    if settings.response_format != ResponseFormat():
        reasons.append(f"responses to LMI/TGI bodies: {settings.response_format.describe()} "
                       "(option.tgi_compat / option.output_formatter)")  # fmt: skip

    vllm_args = (
        settings.model,
        *engine.args,
        *node.args,
        *switch.args,
        *extra_args,
        "--host",
        settings.host,
        "--port",
        str(settings.port),
        "--middleware",
        MIDDLEWARE,
    )
    return Plan(
        model=settings.model,
        vllm_args=vllm_args,
        env=env,
        moe_backend=choice.passed,
        effective_moe_backend=choice.effective,
        moe_backend_source=choice.source,
        moe_kernel=kernel.kernel,
        quantization=PlanQuantization.of(model.quantization),
        gpu=gpus.summary(),
        model_info=PlanModel.of(model),
        vllm_version=caps.version,
        vllm_version_source=caps.source,
        reasons=tuple(reasons),
        ignored_options=tuple(engine.ignored),
        fetch_model=settings.model.startswith("s3://"),
        node_role=node.role.value,
    )
