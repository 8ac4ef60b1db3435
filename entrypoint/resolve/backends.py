"""Which fused-MoE backend can run which scheme on which GPU, and what vLLM's oracle picks by itself.

One small predicate per backend (TGI style), one function predicting vLLM's automatic choice. The
facts are vLLM 0.26's `model_executor/layers/fused_moe/oracle/*.py` and the experts classes'
`_supports_*` methods, summarised in ../shared/reference/vllm-moe-backends.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from entrypoint.model.types import ActivationScheme, Granularity, QuantFamily, Quantization, WeightDtype

HOPPER = 90


@dataclass(frozen=True)
class Fp8Scheme:
    """(weights, activations) the way vLLM's FP8 kernels key their support."""

    weights: str  # "tensor", "channel", "block"
    activations: str  # "static-tensor", "dynamic-tensor", "dynamic-token", "dynamic-group", "none"

    def __str__(self) -> str:
        return f"{self.weights} weights x {self.activations} activations"


def oracle_family(quant: Quantization) -> str | None:
    """The vLLM oracle that handles this checkpoint's MoE layers (keys of caps.family_backends)."""
    if quant.weight_dtype == WeightDtype.FP8:
        return "fp8"
    if quant.weight_dtype == WeightDtype.NVFP4:
        return "nvfp4"
    if quant.weight_dtype == WeightDtype.MXFP4:
        return "mxfp4"
    if quant.weight_dtype == WeightDtype.INT4 or (
        quant.weight_dtype == WeightDtype.INT8 and quant.activation_dtype is None
    ):
        return "int_wna16"
    if quant.weight_dtype == WeightDtype.INT8:
        return "int8"
    if quant.family == QuantFamily.UNQUANTIZED:
        return "unquantized"
    return None


def fp8_scheme(quant: Quantization) -> Fp8Scheme:
    weights = {Granularity.BLOCK: "block", Granularity.CHANNEL: "channel"}.get(quant.weight_granularity, "tensor")
    if quant.activation_dtype is None or quant.activation_scheme == ActivationScheme.NONE:
        activations = "none"
    elif quant.activation_scheme == ActivationScheme.STATIC:
        activations = "static-tensor"
    else:
        activations = {
            Granularity.TOKEN: "dynamic-token",
            Granularity.GROUP: "dynamic-group",
            Granularity.BLOCK: "dynamic-group",
        }.get(quant.activation_granularity, "dynamic-tensor")
    if weights == "block" and activations.startswith("dynamic"):
        activations = "dynamic-group"  # block checkpoints quantise activations per 1x128 group
    return Fp8Scheme(weights, activations)


def _sm_family(sm: int) -> int:
    """vLLM's is_device_capability_family: 100 and 103 are one family, 120 and 121 another."""
    return sm // 10 * 10


# --- FP8 predicates: None when supported, else the reason ------------------------------------


def _fp8_triton(s: Fp8Scheme, sm: int, quant: Quantization) -> str | None:
    if sm < 89:
        return "Triton FP8 matmuls need SM89 or newer (Ada/Hopper/Blackwell)"
    ok = (
        s.weights == "block"
        or (s.weights == "channel" and s.activations == "dynamic-token")
        or (s.weights == "tensor" and s.activations in ("dynamic-token", "static-tensor", "dynamic-tensor"))
    )
    return None if ok else f"Triton has no kernel for {s}"


def _fp8_flashinfer_cutlass(s: Fp8Scheme, sm: int, quant: Quantization) -> str | None:
    if _sm_family(sm) not in (90, 100, 120):
        return "FlashInfer CUTLASS MoE runs on SM90, SM100 and SM120 only"
    if s.weights == "tensor" and s.activations == "static-tensor":
        return None
    if s.weights == "block" and sm == HOPPER:
        return None
    return (
        f"FlashInfer CUTLASS supports per-tensor weights with static activation scales (and 128-block on SM90), not {s}"
    )


def _fp8_flashinfer_trtllm(s: Fp8Scheme, sm: int, quant: Quantization) -> str | None:
    if _sm_family(sm) != 100:
        return "FlashInfer TRT-LLM MoE kernels exist for the SM100 family (B200/GB200) only"
    if (s.weights, s.activations) in (("tensor", "static-tensor"),) or s.weights == "block":
        return None
    return f"FlashInfer TRT-LLM supports per-tensor static and 128-block FP8, not {s}"


def _fp8_deep_gemm(s: Fp8Scheme, sm: int, quant: Quantization) -> str | None:
    if _sm_family(sm) not in (90, 100):
        return "DeepGEMM runs on SM90 and SM100 only"
    if s.weights != "block" or quant.block_shape not in (None, (128, 128)):
        return f"DeepGEMM needs 128x128 block-quantised weights, this checkpoint has {s}"
    return None


def _fp8_vllm_cutlass(s: Fp8Scheme, sm: int, quant: Quantization) -> str | None:
    if sm < HOPPER:
        return "vLLM's CUTLASS grouped GEMM needs SM90 or newer"
    if quant.family not in (QuantFamily.COMPRESSED_TENSORS, QuantFamily.ONLINE):
        return (
            f"vLLM CUTLASS MoE is only wired for compressed-tensors and online FP8 checkpoints, "
            f"not {quant.family.value}"
        )
    ok = (s.weights, s.activations) in (
        ("channel", "dynamic-token"),
        ("tensor", "dynamic-tensor"),
        ("tensor", "static-tensor"),
    )
    return None if ok else f"vLLM CUTLASS MoE has no kernel for {s}"


def _weight_only(s: Fp8Scheme, sm: int, quant: Quantization) -> str | None:
    return None if sm >= 80 else "weight-only MoE kernels (Marlin, Humming) need SM80 or newer"


def _rocm_only(s: Fp8Scheme, sm: int, quant: Quantization) -> str | None:
    return "AITER kernels run on AMD ROCm GPUs only"


def _hpc(s: Fp8Scheme, sm: int, quant: Quantization) -> str | None:
    return "the `hpc` backend needs an optional kernel package that this image does not install"


FP8_PREDICATES = {
    "triton": _fp8_triton,
    "flashinfer_cutlass": _fp8_flashinfer_cutlass,
    "flashinfer_trtllm": _fp8_flashinfer_trtllm,
    "deep_gemm": _fp8_deep_gemm,
    "cutlass": _fp8_vllm_cutlass,
    "marlin": _weight_only,
    "humming": _weight_only,
    "aiter": _rocm_only,
    "hpc": _hpc,
}

# Non-FP8 families: coarser GPU requirements per backend (minimum SM, or SM families).
_GENERIC_REQUIREMENTS: dict[str, tuple[str, object]] = {
    "triton": ("min", 80),
    "triton_unfused": ("min", 80),
    "marlin": ("min", 80),
    "humming": ("min", 80),
    "cutlass": ("families", (100,)),
    "flashinfer_cutlass": ("families", (90, 100, 120)),
    "flashinfer_cutlass_afp8": ("families", (100,)),
    "flashinfer_trtllm": ("families", (100,)),
    "flashinfer_trtllm_afp8": ("families", (100,)),
    "flashinfer_cutedsl": ("families", (100,)),
    "flashinfer_b12x": ("families", (120,)),
    "deep_gemm": ("families", (90, 100)),
    "emulation": ("min", 0),
}


def _generic_support(backend: str, sm: int) -> str | None:
    kind, value = _GENERIC_REQUIREMENTS.get(backend, ("rocm", None))
    if kind == "min":
        return None if sm >= int(value) else f"{backend} needs SM{value} or newer"  # type: ignore[arg-type]
    if kind == "families":
        families = value  # type: ignore[assignment]
        if _sm_family(sm) in families:  # type: ignore[operator]
            return None
        names = ", ".join(f"SM{f}" for f in families)  # type: ignore[union-attr]
        return f"{backend} runs on {names} only"
    return f"{backend} is not a CUDA backend (ROCm, XPU or CPU only)"


def backend_support(backend: str, quant: Quantization, sm: int) -> str | None:
    """None when `backend` can run this checkpoint's MoE on an `sm` GPU, else why not."""
    if oracle_family(quant) == "fp8":
        predicate = FP8_PREDICATES.get(backend)
        if predicate is None:
            return f"{backend} is not an FP8 MoE backend"
        return predicate(fp8_scheme(quant), sm, quant)
    return _generic_support(backend, sm)


def predict_vllm_auto(quant: Quantization, sm: int, *, expert_parallel: bool) -> tuple[str, str]:
    """(backend, reason) vLLM's oracle picks with `--moe-backend auto` (vLLM 0.26, CUDA)."""
    family = oracle_family(quant)
    sm_family = _sm_family(sm)
    if family == "fp8":
        scheme = fp8_scheme(quant)
        if sm == HOPPER and scheme.weights == "block":
            if expert_parallel:
                return (
                    "flashinfer_cutlass",
                    "vLLM moves FlashInfer CUTLASS first for block FP8 under expert parallelism",
                )
            return "triton", "vLLM moves Triton first for block FP8 under tensor parallelism on SM90"
        # The oracle's priority list, first supported wins (AITER is ROCm only).
        for backend in (
            "flashinfer_trtllm",
            "flashinfer_cutlass",
            "deep_gemm",
            "cutlass",
            "triton",
            "marlin",
        ):
            if backend_support(backend, quant, sm) is None:
                return backend, f"first backend in vLLM's FP8 priority list that supports {scheme} on SM{sm}"
        return "marlin", "no FP8 kernel supports this scheme; vLLM falls back to weight-only Marlin"
    if family == "unquantized":
        if sm_family == 90 or sm < 90:
            return (
                "triton",
                "vLLM prefers Triton for 16-bit MoE on SM90 and older (FlashInfer moved back, PR #44220)",
            )
        return "flashinfer_trtllm", "vLLM tries FlashInfer TRT-LLM first for 16-bit MoE on Blackwell"
    if family == "mxfp4":
        if sm_family == 100:
            return "flashinfer_trtllm", "vLLM picks FlashInfer TRT-LLM for MXFP4 on SM100"
        if sm >= HOPPER:
            return "triton", "vLLM runs MXFP4 through OpenAI's triton_kernels on SM90"
        return "marlin", "MXFP4 on pre-Hopper GPUs runs weight-only through Marlin"
    if family == "nvfp4":
        if sm_family == 100:
            return "flashinfer_trtllm", "vLLM picks FlashInfer TRT-LLM for NVFP4 on SM100"
        return "humming", "NVFP4 has no native kernel before Blackwell: weight-only Humming/Marlin"
    if family == "int_wna16":
        return "marlin", "vLLM runs 4/8-bit weight-only MoE through Marlin"
    if family == "int8":
        return "triton", "vLLM runs INT8 W8A8 MoE through Triton"
    return "unknown", f"no oracle table for quantisation method {quant.method!r}"
