"""option.moe_kernel through the resolver: auto turns our kernel on exactly where the shipped dispatch table has a
row, an explicit `project` that cannot run is refused before anything loads, `vllm` is off."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from entrypoint.config.moe import MoeKernel
from entrypoint.config_resolver import resolve
from entrypoint.inputs.gather import DISPATCH_TABLE_ENV, load_dispatch_table
from entrypoint.model.types import ModelDescription, MoEShape
from entrypoint.moe_plugin import KERNEL_ENV
from entrypoint.resolve.gpu import simulate_gpus
from entrypoint.resolve.vllm_caps import load_snapshot
from entrypoint.utils.errors import ConfigError
from kernels.dispatch import DISPATCH_FILE, DispatchTable
from tests.entrypoint.resolver_cases import CAPS, QWEN3_MOE, SCHEMES, settings

TABLE = DispatchTable.load()
MIXTRAL = MoEShape(num_experts=8, top_k=2, hidden_size=4096, expert_intermediate_size=14336)
DEEPSEEK = MoEShape(num_experts=256, top_k=8, hidden_size=7168, expert_intermediate_size=2048)


def described(scheme: str, moe: MoEShape | None = QWEN3_MOE) -> ModelDescription:
    return ModelDescription(source="/models/m", moe=moe, quantization=SCHEMES[scheme])


def plan_for(scheme: str = "native fp8 static", moe: MoEShape | None = QWEN3_MOE, gpu: str = "H200", **options: str):
    gpus = simulate_gpus(gpu, int(options.pop("num_gpus", "1")))
    return resolve(settings(**options), described(scheme, moe), gpus, CAPS, dispatch=TABLE)


def test_auto_turns_our_kernel_on_where_the_table_has_a_row_and_says_where():
    plan = plan_for()
    assert plan.moe_kernel is MoeKernel.PROJECT
    assert plan.env[KERNEL_ENV] == "project"
    (line,) = [r for r in plan.reasons if r.startswith("moe_kernel:")]
    assert "project (auto): ours at M=1 for E=128,N=768,K=2048,top_k=8,tensor-static" in line
    assert "measured as qwen3-30b-a3b:tp1" in line and ", else vLLM's (" in line
    assert line.endswith("; docs/results/our-kernel.md)")


@pytest.mark.parametrize("scheme", ["modelopt fp8", "ct tensor static"])
def test_every_per_tensor_static_checkpoint_format_is_the_measured_scale_kind(scheme):
    assert plan_for(scheme).moe_kernel is MoeKernel.PROJECT


def test_block_fp8_deepseek_at_tp8_uses_its_row():
    plan = plan_for("fp8 block", DEEPSEEK, num_gpus="8", tensor_parallel_degree="8")
    assert plan.moe_kernel is MoeKernel.PROJECT
    assert any("M=1..2 for E=256,N=256,K=7168,top_k=8,block-dynamic" in r for r in plan.reasons)


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        pytest.param({"moe": MIXTRAL}, "has no M where our kernel wins for E=8,N=14336", id="mixtral: no winning M"),
        pytest.param({"num_gpus": "2", "tensor_parallel_degree": "2"}, "for E=128,N=384", id="qwen3 TP2: not measured"),
        pytest.param({"gpu": "H100"}, "NVIDIA_H100_80GB_HBM3", id="H100: the table is H200 measurements"),
        pytest.param({"gpu": "B200", "moe_backend": "triton"}, "this GPU is SM100", id="B200 with triton"),
        pytest.param({"scheme": "native fp8 dynamic"}, "fp8 dynamic tensor activations", id="dynamic activations"),
        pytest.param(
            {"moe_backend": "flashinfer_cutlass"}, "the MoE backend is flashinfer_cutlass", id="other backend"
        ),
        pytest.param({"moe": None}, "the model is dense", id="dense"),
    ],
)
def test_auto_keeps_vllms_kernel_and_says_why(kwargs, why):
    plan = plan_for(**kwargs)
    assert plan.moe_kernel is MoeKernel.VLLM and plan.env[KERNEL_ENV] == "vllm"
    (line,) = [r for r in plan.reasons if r.startswith("moe_kernel:")]
    assert line.startswith("moe_kernel: vllm (auto: ") and why in line


def test_an_explicit_project_that_cannot_run_is_refused_naming_key_value_reason_and_choices():
    with pytest.raises(ConfigError) as caught:
        plan_for(moe=MIXTRAL, moe_kernel="project")
    message = str(caught.value)
    assert message.startswith("option.moe_kernel='project': our fused-MoE kernel cannot run here: ")
    assert "has no M where our kernel wins for E=8,N=14336" in message and message.endswith("Accepted: auto, vllm")


def test_an_explicit_project_where_it_can_run_is_the_users_choice():
    plan = plan_for(moe_kernel="project")
    assert plan.moe_kernel is MoeKernel.PROJECT
    assert any(r.startswith("moe_kernel: project (user setting): ") for r in plan.reasons)


def test_vllm_turns_it_off_even_where_the_table_has_a_row():
    plan = plan_for(moe_kernel="vllm")
    assert plan.moe_kernel is MoeKernel.VLLM and plan.env[KERNEL_ENV] == "vllm"
    assert any(r.startswith("moe_kernel: vllm (user setting from ") for r in plan.reasons)


@pytest.mark.parametrize("options", [{"moe_kernel": "vllm"}, {"moe": MIXTRAL}], ids=["user setting", "auto"])
def test_a_stray_kernel_variable_in_the_container_cannot_override_a_plan_for_vllms_kernel(options):
    """The plugin reads MOE_SERVING_MOE_KERNEL inside vLLM's processes: the plan's value must reach them over one
    the container was started with."""
    from entrypoint.serve import vllm_environment

    plan = plan_for(**options)
    assert plan.moe_kernel is MoeKernel.VLLM
    assert vllm_environment(plan, {KERNEL_ENV: "project"})[KERNEL_ENV] == "vllm"


@pytest.mark.parametrize("version", ["0.33.0", "0.28.0"])
def test_a_vllm_the_plugin_was_not_checked_against_keeps_vllms_kernel(version: str):
    gpus = simulate_gpus("H200")
    plan = resolve(settings(), described("native fp8 static"), gpus, load_snapshot(version), dispatch=TABLE)
    assert plan.moe_kernel is MoeKernel.VLLM
    assert any(f"checked against vLLM 0.32.x, 0.26.x, not {version}" in r for r in plan.reasons)


@pytest.mark.parametrize("version", ["0.32.0", "0.26.0"])
def test_each_checked_vllm_turns_it_on(version: str):
    gpus = simulate_gpus("H200")
    plan = resolve(settings(), described("native fp8 static"), gpus, load_snapshot(version), dispatch=TABLE)
    assert plan.moe_kernel is MoeKernel.PROJECT and plan.vllm_version == version


def test_block_fp8_whose_scale_blocks_vllm_refines_keeps_vllms_kernel():
    # vLLM 0.32 refines 128x128 blocks to 64x64 for Qwen3-235B's 192 columns per GPU at TP8 (oracle/fp8.py
    # resolve_fp8_moe_weight_block_shape); our kernel was measured on 128x128 only (0.26 refuses the split).
    qwen235 = MoEShape(num_experts=128, top_k=8, hidden_size=4096, expert_intermediate_size=1536)
    plan = plan_for("fp8 block", qwen235, num_gpus="8", tensor_parallel_degree="8")
    assert plan.moe_kernel is MoeKernel.VLLM and plan.effective_moe_backend == "triton"
    assert any("refines the 128x128 scale blocks to 64x64 for 192 columns per GPU" in r for r in plan.reasons)
    assert any("moe_kernel: vllm (auto: ours is measured on static per-tensor or 128-block" in r
               for r in plan.reasons)  # fmt: skip


def test_the_shipped_table_loads_and_a_bad_one_named_by_env_is_a_config_error(tmp_path: Path):
    assert load_dispatch_table({}).rows == TABLE.rows and TABLE.source == str(DISPATCH_FILE)
    bad = tmp_path / "table.json"
    rows = json.loads(DISPATCH_FILE.read_text())["rows"]
    rows[0]["scales"] = "channel"
    bad.write_text(json.dumps({"rows": rows}))
    with pytest.raises(ConfigError) as caught:
        load_dispatch_table({DISPATCH_TABLE_ENV: str(bad)})
    assert str(caught.value).startswith(f"{DISPATCH_TABLE_ENV}='{bad}': ")
    assert "row 0: scales='channel'; accepted: tensor-static, block-dynamic" in str(caught.value)


def test_deep_gemm_forced_by_the_environment_keeps_vllms_kernel():
    # vLLM then runs TritonOrDeepGemmExperts: its Triton fallback gets quantised input from the prepare step
    gpus = simulate_gpus("H200", 8)
    model = described("fp8 block", DEEPSEEK)
    options = settings(tensor_parallel_degree="8")
    plan = resolve(options, model, gpus, CAPS, dispatch=TABLE, environ={"VLLM_USE_DEEP_GEMM": "1"})
    assert plan.moe_kernel is MoeKernel.VLLM
    assert any("VLLM_USE_DEEP_GEMM=1 makes vLLM run DeepGEMM" in r for r in plan.reasons)


def test_without_the_plugins_entry_point_auto_keeps_vllms_kernel_and_project_is_refused():
    # seen on the H200 device (2026-12-01): the repo on PYTHONPATH, the package not installed, so vLLM found no
    # entry point and the plan's MOE_SERVING_MOE_KERNEL=project reached an engine that never loaded the plugin
    gpus = simulate_gpus("H200")
    plan = resolve(settings(), described("native fp8 static"), gpus, CAPS, dispatch=TABLE, plugin_installed=False)
    assert plan.moe_kernel is MoeKernel.VLLM and plan.env[KERNEL_ENV] == "vllm"
    (line,) = [r for r in plan.reasons if r.startswith("moe_kernel:")]
    assert "vLLM would not load the plugin: its entry point (vllm.general_plugins: moe_serving_fused_moe" in line
    with pytest.raises(ConfigError, match="option.moe_kernel='project': .*entry point"):
        resolve(settings(moe_kernel="project"), described("native fp8 static"), gpus, CAPS, dispatch=TABLE,
                plugin_installed=False)  # fmt: skip
    checked = resolve(settings(), described("native fp8 static"), gpus, CAPS, dispatch=TABLE, plugin_installed=True)
    assert checked.moe_kernel is MoeKernel.PROJECT


def test_the_entry_point_check_finds_the_installed_package_and_misses_a_bare_checkout(tmp_path: Path):
    from entrypoint.moe_plugin import entry_point_installed
    from tests.bare_checkout import bare_checkout, entry_point_seen

    assert entry_point_installed()  # the venv installs the package (make venv), as the image does
    assert entry_point_seen([bare_checkout(tmp_path)], tmp_path) == "False"


@pytest.mark.parametrize(
    ("plugins", "kernel"),
    [("lora_filesystem_resolver", MoeKernel.VLLM), ("", MoeKernel.VLLM),
     ("lora_filesystem_resolver,moe_serving_fused_moe", MoeKernel.PROJECT)],
)  # fmt: skip
def test_a_vllm_plugins_allowlist_without_ours_keeps_vllms_kernel(plugins, kernel):
    # vLLM loads only the general plugins VLLM_PLUGINS names when it is set (vllm/plugins/__init__.py)
    gpus = simulate_gpus("H200")
    environ = {"VLLM_PLUGINS": plugins}
    plan = resolve(settings(), described("native fp8 static"), gpus, CAPS, dispatch=TABLE, environ=environ)
    assert plan.moe_kernel is kernel
    if kernel is MoeKernel.VLLM:
        assert any(f"VLLM_PLUGINS='{plugins}' lets vLLM load only the plugins it names" in r for r in plan.reasons)
