"""The config resolver: (settings, model, GPUs, vLLM capabilities) → one `vllm serve` plan.

A pure function: no I/O, no clock, no environment reads — everything it needs is an argument, so
the same inputs always give the same plan and every case is a table row in the tests. Order:
1. engine arguments from the LMI options (entrypoint.resolve.engine_args);
2. the MoE backend: an explicit `option.moe_backend` (validated, then it wins), else the first rule
   of entrypoint.resolve.rules that matches, else vLLM's own choice (reported, not passed);
3. environment: tuned Triton configs, era-specific variables, CPU defaults;
4. one reason line per automatic decision.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from entrypoint.config.lmi_options import MOE_KERNEL_VALUES
from entrypoint.config.settings import Settings
from entrypoint.errors import ConfigError
from entrypoint.model.types import ModelDescription, WeightDtype
from entrypoint.resolve.backends import backend_support, fp8_scheme, oracle_family, predict_vllm_auto
from entrypoint.resolve.engine_args import EngineArgsResult, build_engine_args, flag
from entrypoint.resolve.gpu_types import GpuInventory
from entrypoint.resolve.plan import Plan
from entrypoint.resolve.rules import RuleContext, first_matching_rule
from entrypoint.resolve.tuned_configs import TunedConfigIndex, tuned_file_name
from entrypoint.resolve.vllm_caps import VllmCapabilities
from kernels.shapes import moe_partition

MIDDLEWARE = "entrypoint.lmi.middleware.LMIMiddleware"
TUNED_FOLDER_ENV = "VLLM_TUNED_CONFIG_FOLDER"
# Removed in vLLM 0.24 (setting them only logs "Unknown vLLM environment variable").
LEGACY_FLASHINFER_ENV = (
    "VLLM_USE_FLASHINFER_MOE_FP8",
    "VLLM_FLASHINFER_MOE_BACKEND",
    "VLLM_USE_FLASHINFER_MOE_FP4",
)
# Before 0.17 there is no --moe-backend: the era's switches (never VLLM_USE_DEEP_GEMM=1).
PRE_017_BACKEND_ENV: dict[str, dict[str, str]] = {
    "triton": {"VLLM_USE_FLASHINFER_MOE_FP8": "0"},
    "flashinfer_cutlass": {"VLLM_USE_FLASHINFER_MOE_FP8": "1", "VLLM_FLASHINFER_MOE_BACKEND": "throughput"},
    "flashinfer_trtllm": {"VLLM_USE_FLASHINFER_MOE_FP8": "1", "VLLM_FLASHINFER_MOE_BACKEND": "latency"},
}
_CPU_REFUSED_WEIGHTS = (WeightDtype.FP8, WeightDtype.NVFP4, WeightDtype.MXFP4, WeightDtype.INT8)


def _accepted_backends(model: ModelDescription, sm: int, caps: VllmCapabilities) -> list[str]:
    family = oracle_family(model.quantization)
    candidates = caps.family_backends.get(family or "", caps.moe_backend_values)
    return ["auto"] + [b for b in candidates if b != "auto" and backend_support(b, model.quantization, sm) is None]


def _validate_user_backend(
    value: str, model: ModelDescription, gpus: GpuInventory, caps: VllmCapabilities, key: str = "option.moe_backend"
) -> None:
    if gpus.is_cpu:
        raise ConfigError(key, value, "the CPU engine has a single MoE backend", ("auto",))
    sm = gpus.sm or 0
    quant = model.quantization
    accepted = _accepted_backends(model, sm, caps)
    if not caps.has_moe_backend_arg:
        if value not in PRE_017_BACKEND_ENV:
            raise ConfigError(
                key,
                value,
                f"vLLM {caps.version} has no --moe-backend; only these can be selected through "
                "that era's environment variables",
                ["auto", *PRE_017_BACKEND_ENV],
            )
    elif value not in caps.moe_backend_values:
        close = difflib.get_close_matches(value, caps.moe_backend_values, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(key, value, f"not a vLLM {caps.version} MoE backend{hint}", accepted)
    if not model.is_moe:
        return  # a dense model has no MoE layer: the name is all that can be checked
    family = oracle_family(quant)
    family_values = caps.family_backends.get(family or "")
    if family_values is not None and value not in family_values:
        raise ConfigError(
            key,
            value,
            f"vLLM {caps.version} does not offer it for {family} MoE ({quant.summary()})",
            accepted,
        )
    why_not = backend_support(value, quant, sm)
    if why_not:
        gpu_name = gpus.primary.name if gpus.primary else "cpu"
        raise ConfigError(key, value, f"cannot run this checkpoint on {gpu_name} (SM{sm}): {why_not}", accepted)


def _choose_backend(
    settings: Settings,
    model: ModelDescription,
    gpus: GpuInventory,
    caps: VllmCapabilities,
    engine: EngineArgsResult,
) -> tuple[str, str | None, str, list[str]]:
    """(value passed or "auto", effective backend, source, reasons)."""
    user = settings.options.get("moe_backend", "auto").strip().lower().replace("-", "_") or "auto"
    key = settings.option_label("moe_backend")
    if not model.is_moe:
        if user != "auto":
            _validate_user_backend(user, model, gpus, caps, key)  # raises with the accepted values
            return (
                user,
                None,
                "option.moe_backend",
                [f"moe_backend: {user} passed as set; the model is dense"],
            )
        return "auto", None, "none", ["moe_backend: dense model, no MoE layers"]
    if gpus.is_cpu:
        if user != "auto":
            _validate_user_backend(user, model, gpus, caps, key)
        return "auto", "cpu", "none", ["moe_backend: CPU engine, vLLM's CPU MoE kernel is the only one"]
    sm = gpus.sm or 0
    expert_parallel = engine.values.get("enable_expert_parallel") == "true"
    auto_backend, auto_why = predict_vllm_auto(model.quantization, sm, expert_parallel=expert_parallel)
    if user != "auto":
        _validate_user_backend(user, model, gpus, caps, key)
        source = settings.sources.get("moe_backend", "option.moe_backend")
        return (
            user,
            user,
            "option.moe_backend",
            [f"moe_backend: {user} (user setting from {source}; vLLM alone would pick {auto_backend})"],
        )
    max_num_seqs = engine.values.get("max_num_seqs")
    ctx = RuleContext(
        model=model,
        sm=sm,
        max_num_seqs=int(max_num_seqs) if max_num_seqs else None,
        expert_parallel=expert_parallel,
    )
    rule = first_matching_rule(ctx)
    if rule is not None and backend_support(rule.backend, model.quantization, sm) is None:
        return (
            rule.backend,
            rule.backend,
            f"rule:{rule.id}",
            [
                f"moe_backend: {rule.backend} by rule {rule.id} (vLLM alone would pick {auto_backend}); "
                f"evidence: {rule.evidence}"
            ],
        )
    return (
        "auto",
        auto_backend,
        "vllm-auto",
        [f"moe_backend: not passed; vLLM will pick {auto_backend}: {auto_why}"],
    )


def _tuned_config_env(
    model: ModelDescription,
    gpus: GpuInventory,
    engine: EngineArgsResult,
    tuned: TunedConfigIndex | None,
    environ: Mapping[str, str],
) -> tuple[dict[str, str], list[str]]:
    if environ.get(TUNED_FOLDER_ENV):
        return {}, [f"tuned configs: {TUNED_FOLDER_ENV} already set by the user, left as is"]
    if tuned is None:
        return {}, ["tuned configs: none baked in; vLLM uses its shipped or default tiles"]
    moe, device = model.moe, gpus.primary
    assert moe is not None and device is not None  # callers check is_moe and not is_cpu
    tp = int(engine.values.get("tensor_parallel_size", "1"))
    expert_parallel = engine.values.get("enable_expert_parallel") == "true"
    experts, n = moe_partition(moe.num_experts, moe.expert_intermediate_size, tp, expert_parallel)
    dtype = "fp8_w8a8" if model.quantization.is_fp8 else None
    name = tuned_file_name(experts, n, device.name, dtype, model.quantization.block_shape)
    found = "baked file matches" if name in tuned.names else "no baked file for this shape (vLLM falls back)"
    return {TUNED_FOLDER_ENV: tuned.folder}, [f"tuned configs: {TUNED_FOLDER_ENV}={tuned.folder}; {name}: {found}"]


def _environment_checks(model: ModelDescription, caps: VllmCapabilities, environ: Mapping[str, str]) -> list[str]:
    reasons = []
    deep_gemm = next((n for n in ("VLLM_USE_DEEP_GEMM", "VLLM_MOE_USE_DEEP_GEMM") if environ.get(n) == "1"), None)
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


def resolve(
    settings: Settings,
    model: ModelDescription,
    gpus: GpuInventory,
    caps: VllmCapabilities,
    *,
    environ: Mapping[str, str] | None = None,
    tuned: TunedConfigIndex | None = None,
    context_reasons: tuple[str, ...] = (),
) -> Plan:
    """Decide the vLLM command line. Raises ConfigError for anything vLLM would refuse later."""
    environ = environ or {}
    if gpus.is_cpu and model.quantization.weight_dtype in _CPU_REFUSED_WEIGHTS:
        raise ConfigError(
            "model",
            model.source,
            f"{model.quantization.summary()} cannot run on the CPU engine (the CPU build has no "
            "FP8/FP4/INT8 MoE kernels for this processor); run it on an NVIDIA GPU, "
            "or serve a BF16 checkpoint",
        )
    moe_kernel = settings.options.get("moe_kernel", "auto").lower()
    if moe_kernel not in MOE_KERNEL_VALUES or moe_kernel == "project":
        raise ConfigError(
            "option.moe_kernel",
            moe_kernel,
            "this build ships no project MoE kernel plugin yet (see kernels/README.md)"
            if moe_kernel == "project"
            else "unknown value",
            ("auto", "vllm"),
        )
    engine = build_engine_args(settings.options, settings.server, caps, gpus)
    reasons = [*context_reasons, *engine.notes]
    backend, effective, source, backend_reasons = _choose_backend(settings, model, gpus, caps, engine)
    reasons += backend_reasons
    env: dict[str, str] = {}
    backend_args: list[str] = []
    if backend != "auto":
        if caps.has_moe_backend_arg:
            backend_args = [flag("moe_backend"), backend]
        else:
            env.update(PRE_017_BACKEND_ENV[backend])
            reasons.append(f"vLLM {caps.version} has no --moe-backend: selecting {backend} through {sorted(env)}")
    if effective == "triton" and model.quantization.is_fp8 and not gpus.is_cpu:
        tuned_env, tuned_reasons = _tuned_config_env(model, gpus, engine, tuned, environ)
        env.update(tuned_env)
        reasons += tuned_reasons
    reasons += _environment_checks(model, caps, environ)

    extra_args: list[str] = []
    if gpus.is_cpu and "enforce_eager" not in engine.values:
        extra_args.append("--enforce-eager")
        reasons.append(
            "enforce_eager: on for the CPU engine (its compile cache fails to reload: 12 s start vs 24-35 s)"
        )

    vllm_args = (
        model_arg := settings.model,
        *engine.args,
        *backend_args,
        *extra_args,
        "--host",
        settings.host,
        "--port",
        str(settings.port),
        "--middleware",
        MIDDLEWARE,
    )
    return Plan(
        model=model_arg,
        vllm_args=vllm_args,
        env=env,
        moe_backend=backend,
        effective_moe_backend=effective,
        moe_backend_source=source,
        moe_kernel="vllm",
        quantization={**model.quantization.model_dump(mode="json"), "summary": model.quantization.summary()},
        gpu=gpus.as_dict(),
        model_info={
            "source": model.source,
            "architectures": list(model.architectures),
            "moe": model.moe.model_dump(mode="json") if model.moe else None,
        },
        vllm_version=caps.version,
        vllm_version_source=caps.source,
        reasons=tuple(reasons),
        ignored_options=tuple(engine.ignored),
        fetch_model=model_arg.startswith("s3://"),
    )
