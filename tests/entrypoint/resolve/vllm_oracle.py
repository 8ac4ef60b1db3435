"""The installed vLLM's own FP8 MoE oracle, run on this CPU machine for a pretend CUDA GPU.

What runs is vLLM's code, unchanged: the quantisation methods' constructors (quantization/fp8.py Fp8MoEMethod,
modelopt.py ModelOptFp8MoEMethod, compressed_tensors_moe_w8a8_fp8.py), which key the checkpoint's scheme and call
oracle/fp8.py select_fp8_moe_backend, which walks its priority list and asks every experts class
`is_supported_config`. Three things stand in for the GPU host, nothing else:
- the platform: vLLM's own CUDA platform class (platforms/cuda.py) with `get_device_capability` answering the
  simulated compute capability instead of asking the driver. Importing that module needs one compiled extension,
  `vllm._C_stable_libtorch`, which only registers ops: an empty module stands in for it;
- the optional kernel packages the image installs, which this machine lacks: FlashInfer's fused MoE (the image's
  flashinfer-python), humming-kernels (a dependency of the vllm wheel), deep_gemm (vendored in the vllm wheel);
- the CUTLASS grouped-GEMM op of the CUDA build (`torch.ops._C.cutlass_group_gemm_supported`, true for the
  capabilities vLLM's Python wrapper lets through: 90 <= cc < 110);
- humming's `GemmType` enum, which the Humming experts' is_supported_config names (vllm/utils/humming.py imports
  it from the package): members INDEXED, GROUPED_CONTIGUOUS, GROUPED_MASKED, whose values vLLM compares,
  lower-cased, with its own gemm-type names ("indexed", "grouped_contiguous").
`simulated_cuda` swaps these in for every loaded vLLM module and puts the originals back afterwards.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch

from entrypoint.model.types import ActivationScheme, Granularity, QuantFamily, Quantization

_GEMM_TYPES = ("INDEXED", "GROUPED_CONTIGUOUS", "GROUPED_MASKED")
_MISSING = object()


class _Capability:
    value = (9, 0)


@contextlib.contextmanager
def simulated_cuda() -> Iterator[Callable[[int], None]]:
    """Inside: vLLM believes it runs on CUDA; the yielded function sets the compute capability (90 = SM90)."""
    sys.modules.setdefault("vllm._C_stable_libtorch", types.ModuleType("vllm._C_stable_libtorch"))
    import vllm.platforms as platforms
    from vllm.model_executor.layers.fused_moe.experts import (
        flashinfer_cutlass_moe,
        fused_humming_moe,
        trtllm_fp8_moe,
    )
    from vllm.model_executor.layers.fused_moe.oracle import fp8 as oracle_fp8
    from vllm.platforms.cuda import CudaPlatform
    from vllm.platforms.interface import DeviceCapability
    from vllm.utils import deep_gemm
    from vllm.utils import humming as vllm_humming

    # every experts class the FP8 oracle can name, imported now so that the scan below patches them too
    for backend in oracle_fp8.Fp8MoeBackend:
        with contextlib.suppress(ValueError, ImportError):
            oracle_fp8.backend_to_kernel_cls(backend)

    class SimulatedCuda(CudaPlatform):
        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> DeviceCapability:
            return DeviceCapability(*_Capability.value)

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return "simulated"

    original = platforms.current_platform
    simulated = SimulatedCuda()
    undo: list[tuple[Any, str, Any]] = []

    def swap(owner: Any, name: str, value: Any) -> None:
        # vars(), not getattr: a module's lazy __getattr__ (vllm/utils/humming.py) would import what is missing here
        undo.append((owner, name, vars(owner).get(name, _MISSING)))
        setattr(owner, name, value)

    for name, module in list(sys.modules.items()):
        if name.startswith("vllm") and vars(module).get("current_platform") is original:
            swap(module, "current_platform", simulated)
    swap(platforms, "_current_platform", simulated)
    swap(flashinfer_cutlass_moe, "has_flashinfer_cutlass_fused_moe", lambda: True)
    swap(trtllm_fp8_moe, "has_flashinfer_trtllm_fused_moe", lambda: True)
    swap(fused_humming_moe, "has_humming", lambda: True)
    swap(deep_gemm, "has_deep_gemm", lambda: True)
    swap(vllm_humming, "GemmType", enum.Enum("GemmType", {n: n.lower() for n in _GEMM_TYPES}))
    had_op = hasattr(torch.ops._C, "cutlass_group_gemm_supported")
    torch.ops._C.cutlass_group_gemm_supported = lambda capability: True

    def set_sm(sm: int) -> None:
        _Capability.value = (sm // 10, sm % 10)
        _clear_vllm_caches()  # e.g. utils/deep_gemm.py is_deep_gemm_supported is functools.cache'd per process

    try:
        yield set_sm
    finally:
        for owner, name, value in reversed(undo):
            if value is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, value)
        _clear_vllm_caches()  # nothing answered for the simulated GPU may outlive it
        # modules imported while simulating took the simulated platform from vllm.platforms: give them the real one
        for module in list(sys.modules.values()):
            if vars(module).get("current_platform") is simulated:
                module.current_platform = original
        if not had_op:
            delattr(torch.ops._C, "cutlass_group_gemm_supported")


def _clear_vllm_caches() -> None:
    """Empty every module-level functools cache of the loaded vLLM modules (answers that depend on the platform)."""
    for name, module in list(sys.modules.items()):
        if not name.startswith("vllm"):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, functools._lru_cache_wrapper) and getattr(value, "__module__", None) == name:
                value.cache_clear()


def moe_config(
    *,
    num_experts: int = 128,
    width: int = 768,
    hidden: int = 2048,
    tp: int = 1,
    expert_parallel: bool = False,
    backend: str = "auto",
) -> Any:
    """vLLM's FusedMoEConfig for one layer on `tp` GPUs, as vLLM builds it (under EP: experts whole, TP size 1)."""
    from vllm.model_executor.layers.fused_moe.activation import MoEActivation
    from vllm.model_executor.layers.fused_moe.config import (
        FusedMoEConfig,
        FusedMoEParallelConfig,
        RoutingMethodType,
    )

    parallel = FusedMoEParallelConfig.make_no_parallel()
    if expert_parallel:
        parallel = dataclasses.replace(parallel, ep_size=tp, use_ep=True)
    elif tp > 1:
        parallel = dataclasses.replace(parallel, tp_size=tp)
    return FusedMoEConfig(
        num_experts=num_experts, experts_per_token=8, hidden_dim=hidden, intermediate_size=width,
        num_local_experts=num_experts // (tp if expert_parallel else 1), num_logical_experts=num_experts,
        activation=MoEActivation.SILU, device="cpu", routing_method=RoutingMethodType.Renormalize,
        moe_parallel_config=parallel, in_dtype=torch.bfloat16,
        intermediate_size_per_partition=width if expert_parallel else width // tp, moe_backend=backend,
    )  # fmt: skip


def _ct_args(quant: Quantization) -> tuple[Any, Any]:
    """compressed-tensors' QuantizationArgs for weights and inputs, as a checkpoint's config_groups give them."""
    from compressed_tensors.quantization import QuantizationArgs

    weights: dict[str, Any] = {"num_bits": 8, "type": "float", "symmetric": True, "dynamic": False}
    weights["strategy"] = {Granularity.CHANNEL: "channel", Granularity.BLOCK: "block"}.get(
        quant.weight_granularity, "tensor"
    )
    if quant.block_shape:
        weights["block_structure"] = list(quant.block_shape)
    inputs: dict[str, Any] = {"num_bits": 8, "type": "float", "symmetric": True}
    inputs["dynamic"] = quant.activation_scheme == ActivationScheme.DYNAMIC
    inputs["strategy"] = {Granularity.TOKEN: "token", Granularity.GROUP: "group"}.get(
        quant.activation_granularity, "tensor"
    )
    if inputs["strategy"] == "group":
        inputs["group_size"] = 128
    return QuantizationArgs(**weights), QuantizationArgs(**inputs)


def fp8_moe_method(quant: Quantization, config: Any) -> Any:
    """vLLM's MoE quantisation method for this FP8 checkpoint; its constructor runs the oracle (`.fp8_backend`)."""
    from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors_moe import (
        compressed_tensors_moe_w8a8_fp8 as ct,
    )
    from vllm.model_executor.layers.quantization.fp8 import Fp8Config, Fp8MoEMethod
    from vllm.model_executor.layers.quantization.modelopt import ModelOptFp8Config, ModelOptFp8MoEMethod

    if quant.family == QuantFamily.FP8:
        scheme = "static" if quant.activation_scheme == ActivationScheme.STATIC else "dynamic"
        block = list(quant.block_shape) if quant.block_shape else None
        fp8 = Fp8Config.from_config({"quant_method": "fp8", "activation_scheme": scheme, "weight_block_size": block})
        return Fp8MoEMethod(fp8, types.SimpleNamespace(moe_config=config))
    if quant.family == QuantFamily.MODELOPT:
        return ModelOptFp8MoEMethod(ModelOptFp8Config("FP8", True, None, []), config)
    if quant.family == QuantFamily.COMPRESSED_TENSORS:
        weights, inputs = _ct_args(quant)
        return ct.CompressedTensorsW8A8Fp8MoEMethod(weights, inputs, config)
    raise ValueError(f"no vLLM FP8 MoE method here for {quant.family}")


def backend_names() -> dict[Any, str]:
    """vLLM's Fp8MoeBackend → the --moe-backend name that selects it (oracle/fp8.py map_fp8_backend)."""
    from vllm.model_executor.layers.fused_moe.oracle import fp8 as oracle_fp8
    from vllm.model_executor.layers.fused_moe.oracle.fp8 import map_fp8_backend

    names = {}
    for name in ("triton", "deep_gemm", "cutlass", "flashinfer_trtllm", "flashinfer_cutlass", "marlin", "humming",
                 "aiter", "hpc"):  # fmt: skip
        names[map_fp8_backend(name)] = name
    names[oracle_fp8.Fp8MoeBackend.NONE] = "none"
    return names
