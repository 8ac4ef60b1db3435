"""The engine plugin without a GPU: registration in a real vLLM process, the version check, the hook-point check,
and the patched TritonExperts of the installed vLLM dispatching by token count — our kernel (Triton's interpreter on
the CPU) against the float64 reference, vLLM's path everywhere else.

vLLM's own Triton kernel needs CUDA, so on the CPU the class under the patch is vLLM's TritonExperts with its apply
replaced by a recorder (`RecordingExperts`); tests/entrypoint/moe_plugin/test_plugin_gpu.py runs the real one."""

from __future__ import annotations

import inspect
import logging
import os
import platform
import subprocess
import sys
from typing import Any, ClassVar

import pytest
import torch

from entrypoint.moe_plugin import GEMM1_PDL_ENV, KERNEL_ENV
from entrypoint.moe_plugin.fold_routing import FOLD_ENV
from entrypoint.moe_plugin.hook import APPLY_PARAMETERS, CHECKED_VLLM, find_hook, install
from entrypoint.moe_plugin.triton_experts import ineligible_because, layer_key, patch
from kernel_checks.reference import MOE_TOLERANCE, fused_moe_reference, rel_err
from kernels.dispatch import DispatchRow, DispatchTable
from tests.conftest_paths import REPO
from tests.entrypoint.moe_plugin.vllm_experts import ExpertsCase, triton_experts

SHAPE = dict(e=8, top_k=2, k=256, n=128)  # small enough for the interpreter, two K blocks, two N tiles


def _run_vllm_process(code: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, **env},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout + done.stderr


# As vLLM's engine process starts (v1/engine/core.py run_engine_core): logging configured first (0.32 no longer
# configures the "vllm" logger on import), then the general plugins (EngineCore.__init__, the workers).
LOAD_PLUGINS = """
import vllm
from vllm.config.logging import LoggingConfig
from vllm.logger import configure_logging
from vllm.model_executor.layers.fused_moe.experts import triton_moe
configure_logging(LoggingConfig())
{setup}
from vllm.plugins import load_general_plugins
load_general_plugins()
load_general_plugins()  # vLLM calls it in every process it starts, and may call it again: a no-op then
print("apply from", triton_moe.TritonExperts.apply.__module__)
print("expects from", triton_moe.TritonExperts.expects_unquantized_inputs.fget.__module__)
from vllm.model_executor.layers.fused_moe.runner.moe_runner import MoERunner
print("runner from", MoERunner._apply_quant_method.__module__)
"""
PATCHED = "entrypoint.moe_plugin.triton_experts"
VLLMS = "vllm.model_executor.layers.fused_moe.experts.triton_moe"


def _plugin_lines(setup: str, kernel: str, fold: str = "", pdl1: str = "") -> tuple[list[str], str]:
    env = {KERNEL_ENV: kernel, FOLD_ENV: fold, GEMM1_PDL_ENV: pdl1}
    out = _run_vllm_process(LOAD_PLUGINS.format(setup=setup), env)
    return [line for line in out.splitlines() if "moe_kernel=project" in line], out


@pytest.mark.parametrize("kernel", ["project", ""], ids=["our kernel", "vLLM's kernel"])
def test_the_gemm1_pdl_switch_is_said_once_and_only_with_our_kernel(kernel: str) -> None:
    lines, out = _plugin_lines("", kernel, pdl1="1")
    if kernel:
        assert len(lines) == 2 and f"{GEMM1_PDL_ENV}=1: our first MoE GEMM launches under PDL" in lines[1], out[-3000:]
    else:
        assert lines == [], out[-3000:]


@pytest.mark.parametrize("fold", ["1", "0"])
def test_the_fold_switch_wraps_vllms_runner_only_when_asked(fold: str) -> None:
    lines, out = _plugin_lines("", "project", fold)
    if fold == "1":
        assert len(lines) == 2 and "the router's top-k runs inside our kernel" in lines[1], out[-3000:]
        assert "runner from entrypoint.moe_plugin.fold_routing" in out
    else:
        assert len(lines) == 1, out[-3000:]
        assert "runner from vllm.model_executor.layers.fused_moe.runner.moe_runner" in out


@pytest.mark.parametrize("asked", [True, False], ids=["plan asks for it", "plan does not"])
def test_vllm_loads_the_plugin_which_wraps_the_installed_vllm_032_triton_experts(asked: bool) -> None:
    # The installed vLLM of `make venv` is the CPU build 0.32.0: its TritonExperts is the class the plugin was read
    # against, found through the real vllm.general_plugins entry point (pyproject.toml) by vLLM's own loader.
    lines, out = _plugin_lines("", "project" if asked else "")
    assert "vllm.__version__" not in out
    if asked:
        assert len(lines) == 1, out[-3000:]
        assert f"{VLLMS}.TritonExperts dispatches to ops.fused_moe_fp8 by token count" in lines[0]
        assert f"apply from {PATCHED}" in out and f"expects from {PATCHED}" in out
    else:
        assert lines == []
        assert f"apply from {VLLMS}" in out and f"expects from {VLLMS}" in out


@pytest.mark.parametrize("version", ["0.33.0", "0.31.1", "0.27.0"])
def test_an_unchecked_vllm_version_keeps_vllms_kernel_with_one_line(version: str) -> None:
    # The real package and loader; only the version string is another (vllm.__version__, what the plugin reads).
    lines, out = _plugin_lines(f"vllm.__version__ = {version!r}", "project")
    assert len(lines) == 1, out[-3000:]
    assert f"vLLM {version} is not a version this plugin was checked against (0.32.x, 0.26.x)" in lines[0]
    assert "vLLM's fused-MoE kernels run" in lines[0]
    assert f"apply from {VLLMS}" in out and f"expects from {VLLMS}" in out


CHANGED_APPLY = """
def apply(self, output, hidden_states, w1, w2, topk_weights, topk_ids, activation, global_num_experts, expert_map,
          a1q_scale, a2_scale, workspace13, workspace2, expert_tokens_meta, apply_router_weight_on_input,
          routing_replay_out=None):
    raise AssertionError("never called here")
apply.__module__ = "vllm.model_executor.layers.fused_moe.experts.triton_moe"
triton_moe.TritonExperts.apply = apply
"""


def test_a_hook_class_with_another_apply_signature_keeps_vllms_kernel_with_one_line() -> None:
    # The installed 0.32 TritonExperts, its apply given one more parameter (what a vLLM that changes the contract
    # would look like): the plugin must not wrap it, and must say so once.
    lines, out = _plugin_lines(CHANGED_APPLY, "project")
    assert len(lines) == 1, out[-3000:]
    assert "moe_kernel=project: hook point not found in vLLM 0.32.0" in lines[0]
    assert "TritonExperts.apply takes (self, output, hidden_states, w1, w2," in lines[0]
    assert "routing_replay_out), not the arguments this plugin was checked against" in lines[0]
    assert f"apply from {VLLMS}" in out and f"expects from {VLLMS}" in out


# ARCH_GET_XCOMP_PERM (arch/x86/include/uapi/asm/prctl.h) through the raw syscall: the features this process may use.
AMX_PERMISSION = """
import ctypes, torch
libc = ctypes.CDLL(None, use_errno=True)
def tiles_permitted():
    mask = ctypes.c_ulong(0)
    assert libc.syscall(158, 0x1022, ctypes.byref(mask)) == 0  # SYS_arch_prctl, ARCH_GET_XCOMP_PERM
    return bool(mask.value & (1 << 18))  # XFEATURE_XTILEDATA
print("amx cpu", torch.cpu._is_amx_tile_supported(), "permitted before", tiles_permitted())
from vllm.plugins import load_general_plugins
load_general_plugins()
print("permitted after", tiles_permitted())
"""


@pytest.mark.skipif(platform.machine() != "x86_64", reason="AMX and arch_prctl are x86-64 only")
def test_the_plugin_asks_for_the_amx_permission_vllms_cpu_attention_uses() -> None:
    # Without it the EngineCore died with SIGILL in cpu_attention_with_kv_cache on an AMX host (cpu_amx.py); on a CPU
    # without AMX tiles there is nothing to ask and nothing is said.
    out = _run_vllm_process(AMX_PERMISSION, {KERNEL_ENV: ""})
    if "amx cpu True" in out:
        assert "permitted before False" in out and "permitted after True" in out, out[-2000:]
    else:
        assert "amx cpu False" in out and "permitted after False" in out, out[-2000:]


@pytest.mark.parametrize("version", ["0.32.0", "0.26.0"])
def test_a_missing_hook_point_leaves_vllms_kernel_and_says_so(version: str, caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.moe_plugin")
    with caplog.at_level(logging.INFO, logger="test.moe_plugin"):
        assert not install(None, logger, version=version, hook_module="vllm.model_executor.no_such_module")
    (record,) = caplog.records
    assert (
        f"hook point not found in vLLM {version} (vllm.model_executor.no_such_module does not import"
        in record.getMessage()
    )


def test_the_hook_check_refuses_a_changed_apply_signature() -> None:
    cls, why = find_hook("tests.entrypoint.moe_plugin.test_plugin", "ChangedExperts")
    assert cls is None and "ChangedExperts.apply takes (self, output, hidden_states)" in why
    cls, why = find_hook("tests.entrypoint.moe_plugin.test_plugin", "NoPropertyExperts")
    assert cls is None and why == "NoPropertyExperts.expects_unquantized_inputs is not a property"
    cls, why = find_hook("vllm.model_executor.layers.fused_moe.experts.triton_moe", "NoSuchExperts")
    assert cls is None and why.endswith("triton_moe.NoSuchExperts is missing")
    cls, why = find_hook("vllm.model_executor.layers.fused_moe.experts.triton_moe", "TritonExperts")
    assert why == "" and tuple(inspect.signature(cls.apply).parameters) == APPLY_PARAMETERS


def test_the_installed_vllm_is_a_checked_version_with_the_read_contract() -> None:
    # What the plugin relies on in the installed 0.32, read from the package itself.
    import vllm
    from vllm.model_executor.layers.fused_moe import modular_kernel
    from vllm.model_executor.layers.fused_moe.experts.triton_moe import TritonExperts

    assert vllm.__version__.startswith(CHECKED_VLLM)
    # the prepare step (FusedMoEKernelModularImpl._prepare) defers the input quantisation when the experts ask
    prepare_source = inspect.getsource(modular_kernel.FusedMoEKernelModularImpl._prepare)
    assert prepare_source.count("defer_input_quant=self.fused_experts.expects_unquantized_inputs") == 2
    # vLLM's own apply quantises an unquantised input itself (what our expects_unquantized_inputs relies on)
    apply_source = inspect.getsource(TritonExperts.apply)
    assert "if self.expects_unquantized_inputs:" in apply_source and "moe_kernel_quantize_input(" in apply_source


class NoPropertyExperts:
    def expects_unquantized_inputs(self) -> bool:
        return False

    def apply(self, output: Any, hidden_states: Any) -> None:
        pass


class ChangedExperts:
    @property
    def expects_unquantized_inputs(self) -> bool:
        return False

    def apply(self, output: Any, hidden_states: Any) -> None:
        pass


def _recording_class() -> type:
    """vLLM's TritonExperts with apply recording what vLLM's kernel was asked (it cannot run on the CPU)."""
    from vllm.model_executor.layers.fused_moe.experts.triton_moe import TritonExperts

    class RecordingExperts(TritonExperts):
        calls: ClassVar[list[dict[str, Any]]] = []

        def apply(self, **kwargs: Any) -> None:  # type: ignore[override]
            # what vLLM's apply would read: with True it quantises the input itself and asserts a1q_scale is None
            RecordingExperts.calls.append({**kwargs, "expects_unquantized": self.expects_unquantized_inputs})
            kwargs["output"].zero_()

    return RecordingExperts


def _patched(case: ExpertsCase, ranges: tuple[tuple[int, int], ...], activation: str = "silu") -> type:
    cls = _recording_class()
    key = layer_key(case.experts)
    table = DispatchTable.from_rows([DispatchRow(key, "test", activation, ranges)], "test-table")
    patch(cls, table, logging.getLogger("test.moe_plugin"))
    case.experts.__class__ = cls  # the instance vLLM built, now of the patched class
    return cls


def _reference(case: ExpertsCase, weights: torch.Tensor | None = None, ids: torch.Tensor | None = None):
    kw = {k: v for k, v in case.kernel_kwargs.items()}
    w = case.topk_weights if weights is None else weights
    i = case.topk_ids if ids is None else ids
    return fused_moe_reference(case.hidden, case.w13, case.w2, w, i, **kw)


@pytest.mark.parametrize(
    ("scales", "gated"),
    [("tensor-static", True), ("block-dynamic", True), ("tensor-static", False)],
    ids=["per-tensor static SiLU", "128-block dynamic SiLU", "per-tensor static relu2 (Nemotron)"],
)
def test_listed_token_counts_run_our_kernel_and_the_others_vllms(scales: str, gated: bool, device: str) -> None:
    case = triton_experts(2, **SHAPE, scales=scales, gated=gated, device=device)
    cls = _patched(case, ((1, 2),), "silu" if gated else "relu2")
    assert case.experts.expects_unquantized_inputs  # the prepare step must hand apply the bf16 input
    out = case.apply(cls)
    assert cls.calls == []
    assert rel_err(out.double(), _reference(case)) < MOE_TOLERANCE[torch.bfloat16]

    wider = triton_experts(3, **SHAPE, scales=scales, gated=gated, device=device)
    wider.experts.__class__ = cls
    wider.apply(cls)
    assert [c["hidden_states"].shape[0] for c in cls.calls] == [3]
    assert cls.calls[0]["hidden_states"].dtype == torch.bfloat16 and cls.calls[0]["a1q_scale"] is None


def _our_kernels_config(case: ExpertsCase, configs: tuple, monkeypatch, **patch_kw: Any) -> tuple[torch.Tensor, Any]:
    """Apply `case` through a patched class whose row (M 1..2) has tuned `configs`: (the output, the config our
    kernel was called with)."""
    import entrypoint.moe_plugin.triton_experts as plugin

    cls = _recording_class()
    row = DispatchRow(layer_key(case.experts), "test", "silu", ((1, 2),), configs)
    patch(cls, DispatchTable.from_rows([row], "test-table"), logging.getLogger("test.moe_plugin"), **patch_kw)
    case.experts.__class__ = cls
    seen = []
    real = plugin.fused_moe_fp8

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs.get("config"))
        return real(*args, **kwargs)

    monkeypatch.setattr(plugin, "fused_moe_fp8", spy)
    out = case.apply(cls)
    assert cls.calls == [] and len(seen) == 1
    return out, seen[0]


def test_a_tuned_rows_config_reaches_our_kernel_and_keeps_the_answer(device: str, monkeypatch) -> None:
    # a bake-time tune (entrypoint/caches/tune_layer.py) chose a config of our kernel at M = 2: the plugin passes it
    case = triton_experts(2, **SHAPE, scales="tensor-static", device=device)
    tuned = {"pair_mode": True, "block_n1": 32, "split_k": 2}
    out, config = _our_kernels_config(case, ((2, tuple(sorted(tuned.items()))),), monkeypatch)
    assert config is not None and (config.block_n1, config.split_k) == (32, 2)
    assert rel_err(out.double(), _reference(case)) < MOE_TOLERANCE[torch.bfloat16]


@pytest.mark.parametrize("tuned", [True, False], ids=["tuned row", "default config"])
def test_the_gemm1_pdl_switch_reaches_our_kernels_config_and_keeps_the_answer(
    tuned: bool, device: str, monkeypatch
) -> None:
    # MOE_SERVING_GEMM1_PDL=1 (hook.install(gemm1_pdl=True)): the config our kernel runs, tuned or default, with
    # pdl_gemm1 set and nothing else changed (on the CPU the interpreter launches without PDL: same numbers)
    from ops.fused_moe_fp8 import MoEKernelConfig, call_config

    case = triton_experts(2, **SHAPE, scales="tensor-static", device=device)
    config = {"pair_mode": True, "block_n1": 32, "split_k": 2}
    configs = ((2, tuple(sorted(config.items()))),) if tuned else ()
    out, seen = _our_kernels_config(case, configs, monkeypatch, gemm1_pdl=True)
    want = MoEKernelConfig(**config) if tuned else call_config(case.hidden, case.w2, 2)
    assert seen == MoEKernelConfig(**{**want.__dict__, "pdl_gemm1": True})
    assert rel_err(out.double(), _reference(case)) < MOE_TOLERANCE[torch.bfloat16]


def test_a_shape_without_a_row_keeps_vllms_kernel_and_the_quantised_prepare(device: str) -> None:
    case = triton_experts(1, **SHAPE, scales="tensor-static", device=device)
    cls = _recording_class()
    patch(cls, DispatchTable.from_rows([], "empty"), logging.getLogger("test.moe_plugin"))
    case.experts.__class__ = cls
    assert not case.experts.expects_unquantized_inputs
    case.apply(cls)
    assert len(cls.calls) == 1


def test_expert_parallel_ids_outside_this_rank_contribute_nothing(device: str) -> None:
    case = triton_experts(2, **SHAPE, scales="tensor-static", device=device)
    cls = _patched(case, ((1, 4),))
    # this rank holds global experts 8..15 as local 0..7; the token's other expert lives on another rank
    expert_map = torch.full((16,), -1, dtype=torch.int32, device=device)
    expert_map[8:] = torch.arange(8, dtype=torch.int32, device=device)
    global_ids = case.topk_ids.clone() + 8
    global_ids[:, 1] = 0  # on another rank
    out = case.apply(cls, topk_ids=global_ids, expert_map=expert_map, global_num_experts=16)
    weights = case.topk_weights.clone()
    weights[:, 1] = 0
    ref = _reference(case, weights=weights)
    assert rel_err(out.double(), ref) < MOE_TOLERANCE[torch.bfloat16]


def test_router_weight_on_input_is_not_applied_twice(device: str) -> None:
    case = triton_experts(2, e=8, top_k=1, k=256, n=128, scales="tensor-static", device=device)
    cls = _patched(case, ((1, 2),))
    case.topk_weights = torch.tensor([[0.3], [0.7]], device=device)  # top-1 weights are 1 after renormalising
    # vLLM's prepare step already multiplied the input by the (top-1) router weight
    out = case.apply(cls, apply_router_weight_on_input=True)
    ref = _reference(case, weights=torch.ones_like(case.topk_weights))
    assert rel_err(out.double(), ref) < MOE_TOLERANCE[torch.bfloat16]


def test_a_layer_our_kernel_was_not_measured_on_is_never_patched_in(device: str) -> None:
    from vllm.model_executor.layers.fused_moe.config import fp8_w8a8_moe_quant_config

    case = triton_experts(1, **SHAPE, scales="tensor-static", device=device)
    kw = case.kernel_kwargs
    # dynamic per-token activations: not a scale kind in the table (and vLLM's numerics differ from ours there)
    case.experts.quant_config = fp8_w8a8_moe_quant_config(
        w1_scale=kw["w13_scale"], w2_scale=kw["w2_scale"], per_act_token_quant=True
    )
    cls = _recording_class()
    table = DispatchTable.from_rows(
        [DispatchRow(layer_key(triton_experts(1, **SHAPE, scales="tensor-static").experts), "t", "silu", ((1, 8),))],
        "t",
    )
    patch(cls, table, logging.getLogger("test.moe_plugin"))
    case.experts.__class__ = cls
    assert not case.experts.expects_unquantized_inputs


def test_an_input_the_prepare_step_quantised_goes_to_vllm_which_sees_the_original_answer(device: str) -> None:
    # vLLM's FallbackExperts (TritonOrDeepGemmExperts under VLLM_USE_DEEP_GEMM=1) answers expects_unquantized_inputs
    # False for the TritonExperts it holds, so the prepare step quantises and the inner apply gets fp8 + a1q_scale:
    # vLLM's apply must not see True then (it would assert a1q_scale is None).
    case = triton_experts(2, **SHAPE, scales="tensor-static", device=device)
    cls = _patched(case, ((1, 2),))
    ex = case.experts
    # the static quantisation the prepare step applies (vLLM's own op is not in its CPU build)
    xs = ex.a1_scale.reshape(1)
    xq = (case.hidden.float() / xs).clamp(-448, 448).to(torch.float8_e4m3fn)
    case.apply(cls, hidden_states=xq, a1q_scale=xs)
    (call,) = cls.calls
    assert call["a1q_scale"] is xs and call["expects_unquantized"] is False
    assert ex.expects_unquantized_inputs  # the layer's own prepare step still defers to our kernel afterwards


def test_padding_rows_and_other_ranks_experts_contribute_nothing_with_or_without_an_expert_map(device: str) -> None:
    from entrypoint.moe_plugin.triton_experts import run_project_kernel

    case = triton_experts(2, **SHAPE, scales="tensor-static", device=device)
    ids = case.topk_ids.clone()
    ids[1] = -1  # VLLM_MOE_SKIP_PADDING marks a padded row's every slot
    weights = case.topk_weights.clone()
    weights[1] = 0

    def run(expert_map: torch.Tensor | None) -> torch.Tensor:
        out = torch.empty_like(case.hidden)
        run_project_kernel(
            case.experts, out, case.hidden, case.w13, case.w2, case.topk_weights, ids, "silu", expert_map,
            case.experts.a2_scale, False,
        )  # fmt: skip
        return out

    ref = _reference(case, weights=weights, ids=ids.clamp_min(0))
    for expert_map in (None, torch.arange(8, dtype=torch.int32, device=device)):
        out = run(expert_map)
        assert rel_err(out.double(), ref) < MOE_TOLERANCE[torch.bfloat16]
        assert torch.equal(out[1], torch.zeros_like(out[1]))
    # expert parallelism: an expert another rank holds maps to -1 and adds nothing here
    elsewhere = int(case.topk_ids[0, 0])
    expert_map = torch.arange(8, dtype=torch.int32, device=device)
    expert_map[elsewhere] = -1
    weights[ids == elsewhere] = 0
    ref = _reference(case, weights=weights, ids=ids.clamp_min(0))
    assert rel_err(run(expert_map).double(), ref) < MOE_TOLERANCE[torch.bfloat16]


@pytest.mark.parametrize(
    "source", ["swiglu_limit", "gemm1_clamp_limit"], ids=["the model's (0.32)", "the quant config's"]
)
def test_a_swiglu_clamp_from_either_source_keeps_vllms_kernel(source: str, device: str) -> None:
    # vLLM 0.32 clamps SiLU's inputs when the quant config or the model (FusedMoEFactory(swiglu_limit=...)) sets a
    # limit (fused_moe/activation.py ApplyMoEActivationConfig); our kernel has no clamp.
    case = triton_experts(2, **SHAPE, scales="tensor-static", device=device, **{source: 7.0})
    assert case.experts.activation_config.clamp_limit == 7.0
    cls = _patched(case, ((1, 2),))
    assert not case.experts.expects_unquantized_inputs
    assert ineligible_because(case.experts) == "a SwiGLU clamp"
    case.apply(cls)
    assert len(cls.calls) == 1


@pytest.mark.parametrize(("value", "masked"), [(None, True), ("1", True), ("0", False)], ids=["unset", "1", "0"])
def test_padding_rows_are_masked_as_the_installed_vllm_marks_them(
    value: str | None, masked: bool, device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # vLLM 0.32 gives padding rows expert id -1 unless VLLM_MOE_SKIP_PADDING=0 (envs.py: on by default; 0.26: off).
    if value is None:
        monkeypatch.delenv("VLLM_MOE_SKIP_PADDING", raising=False)
    else:
        monkeypatch.setenv("VLLM_MOE_SKIP_PADDING", value)
    import vllm.envs as envs

    assert envs.VLLM_MOE_SKIP_PADDING is masked
    case = triton_experts(2, **SHAPE, scales="tensor-static", device=device)
    cls = _patched(case, ((1, 2),))
    ids = case.topk_ids.clone()
    if masked:
        ids[1] = -1  # what vLLM's router writes for a padding row
        out = case.apply(cls, topk_ids=ids)
        weights = case.topk_weights.clone()
        weights[1] = 0
        ref = _reference(case, weights=weights, ids=ids.clamp_min(0))
    else:
        out = case.apply(cls)  # no -1 ids then: the padding rows are computed like any other
        ref = _reference(case)
    assert cls.calls == []
    assert rel_err(out.double(), ref) < MOE_TOLERANCE[torch.bfloat16]


def test_the_bake_time_tune_reaches_our_kernel_through_the_plugin() -> None:
    # only the plugin imports ops (pyproject's import contracts); the tune races what it hands out (tune_layer.py)
    import ops.fused_moe_fp8 as ours
    from entrypoint.moe_plugin.triton_experts import project_kernel

    run, configs = project_kernel()
    assert run is ours.fused_moe_fp8 and configs is ours.candidate_configs
