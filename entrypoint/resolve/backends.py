"""Which fused-MoE backend can run which scheme on which GPU, and what vLLM's oracle picks by itself.

One small predicate per backend (TGI style), one function predicting vLLM's automatic choice. The facts are
vLLM 0.32.0's (the image's vLLM): `model_executor/layers/fused_moe/oracle/*.py` (the priority lists and
`select_*_moe_backend`) and the experts classes' `is_supported_config` / `_supports_*` methods under
`fused_moe/experts/`. tests/entrypoint/resolve/test_backends_vllm.py runs the installed vLLM's own FP8 oracle on a
simulated CUDA device and compares it with every predicate and prediction here.

Other versions: vLLM 0.26.0's files were read too (the LMI v28 engine, and what a user who pins it in their own image
runs); where the two differ the difference is keyed on `vllm_version` below, each with the file it comes from. A
version between the two gets 0.26's facts (the release that moved each one was not read); a version after 0.32 gets
0.32's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from entrypoint.model.types import ActivationScheme, Granularity, QuantFamily, Quantization, WeightDtype
from entrypoint.resolve.vllm_caps import PINNED_VLLM_VERSION, parse_version

HOPPER = 90
V0_32 = (0, 32, 0)  # the first version read with the 0.32 facts below


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
    if quant.family == QuantFamily.COMPRESSED_TENSORS and (weights, activations) == ("tensor", "dynamic-tensor"):
        # compressed_tensors_moe_w8a8_fp8.py ct2vllm_act (0.26 and 0.32): a dynamic `tensor` input strategy is keyed
        # kFp8Dynamic128Sym, which no native FP8 kernel pairs with per-tensor weights
        activations = "dynamic-group"
    return Fp8Scheme(weights, activations)


def _sm_family(sm: int) -> int:
    """vLLM's is_device_capability_family: 100 and 103 are one family, 120 and 121 another."""
    return sm // 10 * 10


def _version(vllm_version: str | None) -> tuple[int, int, int]:
    return parse_version(vllm_version or PINNED_VLLM_VERSION)


def _is_128_block(quant: Quantization) -> bool:
    """vLLM's kFp8Static128BlockSym: the block shape most FP8 MoE kernels take (None: block size not read)."""
    return quant.block_shape in (None, (128, 128))


# --- FP8 predicates: None when supported, else the reason ------------------------------------
# vLLM asks each experts class `_supports_current_device()` and `_supports_quant_scheme(weight_key,
# activation_key)` (fused_moe/modular_kernel.py FusedMoEExperts.is_supported_config); the scheme keys are
# quantization/fp8.py's (native: tensor x static/dynamic tensor, 128-block x dynamic 128-group), modelopt.py's
# (tensor x static tensor) and compressed_tensors_moe_w8a8_fp8.py's.


def _fp8_triton(s: Fp8Scheme, sm: int, quant: Quantization) -> str | None:
    # experts/triton_moe.py TritonExperts._supports_quant_scheme: FP8 pairs when current_platform.supports_fp8()
    # (platforms/cuda.py: SM89 and newer); any block shape with dynamic 128-group activations (0.32).
    if sm < 89:
        return "Triton FP8 matmuls need SM89 or newer (Ada/Hopper/Blackwell)"
    ok = (
        s.weights == "block"
        or (s.weights == "channel" and s.activations == "dynamic-token")
        or (s.weights == "tensor" and s.activations in ("dynamic-token", "static-tensor", "dynamic-tensor"))
    )
    return None if ok else f"Triton has no kernel for {s}"


def _fp8_flashinfer_cutlass(s: Fp8Scheme, sm: int, quant: Quantization) -> str | None:
    # experts/flashinfer_cutlass_moe.py FlashInferExperts: devices SM90, SM100 family, SM120 family (SM110 left
    # out); per-tensor static from SM90, 128-block on SM90 only.
    if sm != HOPPER and _sm_family(sm) not in (100, 120):
        return "FlashInfer CUTLASS MoE runs on SM90, the SM100 family and the SM120 family only"
    if s.weights == "tensor" and s.activations == "static-tensor":
        return None
    if s.weights == "block" and sm == HOPPER and _is_128_block(quant):
        return None
    return (
        f"FlashInfer CUTLASS supports per-tensor weights with static activation scales (and 128-block on SM90), not {s}"
    )


def _fp8_flashinfer_trtllm(s: Fp8Scheme, sm: int, quant: Quantization) -> str | None:
    # experts/trtllm_fp8_moe.py: the SM100 family only; the monolithic class takes per-tensor static and 128-block,
    # the modular one 128-block (both: MXFP8, which this resolver does not describe)
    if _sm_family(sm) != 100:
        return "FlashInfer TRT-LLM MoE kernels exist for the SM100 family (B200/GB200) only"
    if (s.weights, s.activations) == ("tensor", "static-tensor") or (s.weights == "block" and _is_128_block(quant)):
        return None
    return f"FlashInfer TRT-LLM supports per-tensor static and 128-block FP8, not {s}"


def _fp8_deep_gemm(s: Fp8Scheme, sm: int, quant: Quantization) -> str | None:
    # experts/triton_deep_gemm_moe.py TritonOrDeepGemmExperts = DeepGemmExperts with TritonExperts as fallback; both
    # must accept. DeepGEMM: utils/deep_gemm.py is_deep_gemm_supported → platforms/cuda.py support_deep_gemm (SM90,
    # the SM100 and SM120 families; the wheel vendors deep_gemm), 128x128 blocks only (deep_gemm_moe.py).
    if sm != HOPPER and _sm_family(sm) not in (100, 120):
        return "DeepGEMM runs on SM90 and the SM100 and SM120 families only"
    if s.weights != "block" or not _is_128_block(quant):
        return f"DeepGEMM needs 128x128 block-quantised weights, this checkpoint has {s}"
    return None


def _fp8_vllm_cutlass(s: Fp8Scheme, sm: int, quant: Quantization) -> str | None:
    # experts/triton_cutlass_moe.py TritonOrCutlassExperts = CutlassExpertsFp8 with TritonExperts as fallback;
    # cutlass_moe.py: cutlass_group_gemm_supported (_custom_ops.py: 90 <= capability < 110, so not SM120).
    # oracle/fp8.py select_fp8_moe_backend drops it unless allow_vllm_cutlass, which only
    # compressed_tensors_moe_w8a8_fp8.py and online/fp8.py pass.
    if sm < HOPPER or sm >= 110:
        return "vLLM's CUTLASS grouped GEMM runs on SM90 and the SM100 family only"
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


def _fp8_marlin(s: Fp8Scheme, sm: int, quant: Quantization) -> str | None:
    # experts/marlin_moe.py MarlinExpertsBase: CUDA SM75 and newer, weight-only, so any activation scheme; block
    # weights in 128x128 only (its list names kFp8Static128BlockSym, not vLLM 0.32's refined blocks)
    if sm < 75:
        return "Marlin needs SM75 or newer"
    if s.weights == "block" and not _is_128_block(quant):
        return f"Marlin takes 128x128 weight blocks, not {quant.block_shape}"
    return None


def _fp8_humming(s: Fp8Scheme, sm: int, quant: Quantization) -> str | None:
    # experts/fused_humming_moe.py HummingExpertsBase: CUDA SM75 and newer with its package (humming-kernels, a
    # dependency of the vLLM wheel); _supports_quant_scheme lists every FP8 (weights, activations) pair the
    # checkpoints give but per-tensor weights with dynamic per-tensor activations (native fp8 `dynamic`), and
    # 128x128 blocks only
    if sm < 75:
        return "Humming needs SM75 or newer"
    if s.weights == "block" and not _is_128_block(quant):
        return f"Humming takes 128x128 weight blocks, not {quant.block_shape}"
    if s.activations == "dynamic-tensor":
        return f"Humming has no kernel for {s}"
    return None


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
    "marlin": _fp8_marlin,
    "humming": _fp8_humming,
    "aiter": _rocm_only,
    "hpc": _hpc,
}

# oracle/fp8.py _get_priority_backends on CUDA, as --moe-backend names (map_fp8_backend), first supported wins.
# Left out: AITER (ROCm), the BATCHED_* variants (chosen for the batched all-to-all formats, which this image's
# plans do not use), XPU, CPU, CPU_W8A8, HPC (not installed). Same list in 0.26 and 0.32.
FP8_PRIORITY = ("flashinfer_trtllm", "flashinfer_cutlass", "deep_gemm", "cutlass", "triton", "marlin", "humming")


def _humming_before_marlin(sm: int, version: tuple[int, int, int]) -> bool:
    """0.32: the fp8, nvfp4, mxfp4 and int_wna16 oracles pass their lists through prioritize_humming
    (quantization/utils/humming/priority.py: Humming right before Marlin where prefers_humming, i.e. on SM90 only).
    0.26 has no such step: Marlin comes first everywhere."""
    return version >= V0_32 and sm == HOPPER


def fp8_priority(sm: int, vllm_version: str | None = None) -> tuple[str, ...]:
    """The FP8 oracle's CUDA order on an `sm` GPU before its scheme-specific moves (see predict_vllm_auto)."""
    order = list(FP8_PRIORITY)
    if _humming_before_marlin(sm, _version(vllm_version)):
        order.remove("humming")
        order.insert(order.index("marlin"), "humming")
    return tuple(order)


# Non-FP8 families: coarser GPU requirements per backend (minimum SM, or SM families).
_GENERIC_REQUIREMENTS: dict[str, tuple[str, object]] = {
    "triton": ("min", 80),
    "triton_unfused": ("min", 80),
    "marlin": ("min", 75),
    "humming": ("min", 75),
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


def _expert_count_limit(backend: str, family: str | None, num_experts: int | None, version: tuple[int, int, int]):
    """Limits on the number of (global) experts some 0.32 kernels check in is_supported_config."""
    if num_experts is None or version < V0_32:
        return None
    # experts/triton_moe.py TritonExperts.is_supported_config (TritonWNA16Experts inherits it): moe_align_block_size
    # needs fewer than 1024 experts once rounded up to a multiple of 32
    triton_family = family in ("fp8", "unquantized", "int8", "int_wna16")
    if backend == "triton" and triton_family and (num_experts + 31) // 32 * 32 >= 1024:
        return f"vLLM's Triton MoE aligns fewer than 1024 (padded) experts, this model has {num_experts}"
    # experts/trtllm_fp8_moe.py TrtLlmFp8ExpertsBase.is_supported_config
    if backend == "flashinfer_trtllm" and family == "fp8" and num_experts > 2048:
        return f"FlashInfer TRT-LLM routing takes at most 2048 experts, this model has {num_experts}"
    return None


def backend_support(
    backend: str,
    quant: Quantization,
    sm: int,
    *,
    num_experts: int | None = None,
    vllm_version: str | None = None,
) -> str | None:
    """None when `backend` can run this checkpoint's MoE on an `sm` GPU, else why not. `num_experts`: the model's
    experts (None: not checked); `vllm_version`: the vLLM whose facts apply (None: the pinned one)."""
    family = oracle_family(quant)
    if family == "fp8":
        predicate = FP8_PREDICATES.get(backend)
        if predicate is None:
            return f"{backend} is not an FP8 MoE backend"
        why = predicate(fp8_scheme(quant), sm, quant)
    else:
        why = _generic_support(backend, sm)
    return why or _expert_count_limit(backend, family, num_experts, _version(vllm_version))


def predict_vllm_auto(
    quant: Quantization,
    sm: int,
    *,
    expert_parallel: bool,
    num_experts: int | None = None,
    vllm_version: str | None = None,
) -> tuple[str, str]:
    """(backend, reason) vLLM's oracle picks with `--moe-backend auto` on CUDA (vLLM 0.32 unless `vllm_version`)."""
    family = oracle_family(quant)
    sm_family = _sm_family(sm)
    version = _version(vllm_version)
    humming_first = _humming_before_marlin(sm, version)
    if family == "fp8":
        scheme = fp8_scheme(quant)
        support = {
            b: backend_support(b, quant, sm, num_experts=num_experts, vllm_version=vllm_version) for b in FP8_PRIORITY
        }
        # oracle/fp8.py _get_priority_backends: on SM90 with 128-block weights and dynamic 128-group activations,
        # FLASHINFER_CUTLASS moves to the front under expert parallelism (ep_size > 1), TRITON otherwise
        if sm == HOPPER and scheme.weights == "block" and _is_128_block(quant):
            first = "flashinfer_cutlass" if expert_parallel else "triton"
            if support[first] is None:
                if expert_parallel:
                    return first, "vLLM moves FlashInfer CUTLASS first for block FP8 under expert parallelism"
                return first, "vLLM moves Triton first for block FP8 under tensor parallelism on SM90"
        # The oracle's priority list, first supported wins (AITER is ROCm only).
        for backend in fp8_priority(sm, vllm_version):
            if support[backend] is None:
                return backend, f"first backend in vLLM's FP8 priority list that supports {scheme} on SM{sm}"
        return "none", f"no FP8 MoE kernel of vLLM supports {scheme} on SM{sm}: vLLM stops when it loads the model"
    if family == "unquantized":
        # oracle/unquantized.py on CUDA: FLASHINFER_TRTLLM, FLASHINFER_CUTLASS, TRITON; both FlashInfer ones move
        # behind Triton on the SM90 family (PR #44220); TRT-LLM bf16 runs on the SM100 family only
        # (experts/trtllm_bf16_moe.py), FlashInfer CUTLASS 16-bit from SM90 (flashinfer_cutlass_moe.py)
        if sm_family == 100:
            return "flashinfer_trtllm", "vLLM tries FlashInfer TRT-LLM first for 16-bit MoE on the SM100 family"
        if sm_family == 120:
            return "flashinfer_cutlass", "vLLM runs 16-bit MoE through FlashInfer CUTLASS on the SM120 family"
        return (
            "triton",
            "vLLM prefers Triton for 16-bit MoE on SM90 and older (FlashInfer moved back, PR #44220)",
        )
    if family == "mxfp4":
        if sm_family == 100:
            return "flashinfer_trtllm", "vLLM picks FlashInfer TRT-LLM for MXFP4 on SM100"
        if sm >= HOPPER:
            return "triton", "vLLM runs MXFP4 through OpenAI's triton_kernels on SM90"
        return "marlin", "MXFP4 on pre-Hopper GPUs runs weight-only through Marlin"
    if family == "nvfp4":
        # oracle/nvfp4.py select_nvfp4_moe_backend: TRT-LLM and the CuteDSL kernels need the SM100 family,
        # FlashInfer CUTLASS runs NVFP4 from SM100 on (the SM120 family too), then Marlin / Humming weight-only
        if sm_family == 100:
            return "flashinfer_trtllm", "vLLM picks FlashInfer TRT-LLM for NVFP4 on SM100"
        if sm_family == 120:
            return "flashinfer_cutlass", "vLLM runs NVFP4 through FlashInfer CUTLASS on the SM120 family"
        if humming_first:
            return (
                "humming",
                "NVFP4 has no native kernel before Blackwell: weight-only, Humming ahead of Marlin on SM90",
            )
        return "marlin", "NVFP4 has no native kernel before Blackwell: weight-only through Marlin"
    if family == "int_wna16":
        # oracle/int_wna16.py _get_priority_backends: FLASHINFER_TRTLLM (SM100), MARLIN, ..., TRITON, HUMMING
        if humming_first:
            return "humming", "vLLM runs 4/8-bit weight-only MoE through Humming on SM90 (ahead of Marlin)"
        return "marlin", "vLLM runs 4/8-bit weight-only MoE through Marlin"
    if family == "int8":
        return "triton", "vLLM runs INT8 W8A8 MoE through Triton"
    return "unknown", f"no oracle table for quantisation method {quant.method!r}"


@dataclass(frozen=True)
class BlockSplit:
    """How vLLM lays 128-block (or other block) FP8 experts over a tensor-parallel split."""

    outcome: str  # "fits", "refined" (finer scale blocks), "padded" (whole blocks per rank), "refused"
    block: tuple[int, int]  # the block shape vLLM's MoE kernels then get
    width: int  # each rank's expert width after the split (and padding)
    reason: str = ""


def fp8_block_split(
    quant: Quantization,
    width: int,
    hidden: int,
    tp: int,
    *,
    expert_parallel: bool,
    backend: str,
    vllm_version: str | None = None,
) -> BlockSplit:
    """What vLLM does with block-FP8 experts `width` wide (hidden size `hidden`) on `tp` GPUs; `backend`: the
    --moe-backend passed ("auto": none).

    Each rank must hold whole blocks: quantization/utils/fp8_utils.py validate_fp8_block_shape_moe (0.26 and 0.32)
    refuses a rank width that is not a multiple of block_n, or of block_k under TP. vLLM 0.32 rescues native `fp8`
    checkpoints (quantization/fp8.py Fp8MoEMethod → oracle/fp8.py resolve_fp8_moe_weight_block_shape): with `auto`
    or `triton` it refines the scale blocks to gcd(block_n, block_k, rank width, hidden) when that is >= 32
    (only Triton takes such blocks); with any other backend named, or when refining is impossible, it pads each
    rank to whole blocks when block_n == block_k (pad_tp_shard_to_weight_blocks), which needs block-aligned global
    widths. compressed-tensors and other producers get only the check.
    """
    assert quant.block_shape is not None
    block_n, block_k = quant.block_shape
    experts_tp = 1 if expert_parallel else tp  # FusedMoEParallelConfig: experts are not split under EP
    n = width // experts_tp
    fits = n % block_n == 0 and (tp == 1 or n % block_k == 0)
    if _version(vllm_version) < V0_32 or quant.family != QuantFamily.FP8:
        if fits:
            return BlockSplit("fits", quant.block_shape, n)
        return BlockSplit(
            "refused", quant.block_shape, n, f"{n} columns per GPU are not whole {block_n}x{block_k} blocks"
        )
    needs_change = not (n % block_n == 0 and (experts_tp == 1 or n % block_k == 0))
    refine = math.gcd(block_n, block_k, n, hidden) if needs_change else 0
    refined = refine if refine >= 32 else None
    # pad_tp_shard_to_weight_blocks acts only when block_n == block_k, the experts are TP-split and cut a block
    can_pad = block_n == block_k and experts_tp > 1 and n % block_n != 0
    if backend != "auto" and not (refined and backend == "triton") and can_pad:
        if width % block_n or hidden % block_n:
            return BlockSplit(
                "refused",
                quant.block_shape,
                n,
                f"padding each GPU to whole {block_n}-blocks needs {block_n}-aligned global expert dimensions "
                f"(width {width}, hidden {hidden})",
            )
        padded = -(-n // block_n) * block_n
        return BlockSplit(
            "padded",
            quant.block_shape,
            padded,
            f"vLLM pads each GPU's {n} expert columns to {padded} (whole {block_n}x{block_k} blocks)",
        )
    if refined and backend not in ("auto", "triton"):
        # the oracle then refuses the named backend: only Triton takes refined blocks
        return BlockSplit(
            "refused",
            quant.block_shape,
            n,
            f"vLLM would refine the scale blocks to {refined}x{refined} for {n} columns per GPU, which only its "
            f"Triton kernel takes, not {backend}",
        )
    if refined:
        return BlockSplit(
            "refined",
            (refined, refined),
            n,
            f"vLLM refines the {block_n}x{block_k} scale blocks to {refined}x{refined} for {n} columns per GPU; "
            "only its Triton kernel takes them",
        )
    if fits:
        return BlockSplit("fits", quant.block_shape, n)
    return BlockSplit(
        "refused",
        quant.block_shape,
        n,
        f"{n} columns per GPU are not whole {block_n}x{block_k} blocks, and no block of at least 32 divides them",
    )
