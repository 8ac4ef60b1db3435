"""The resolver as a pure function: decisions per scheme × GPU, overrides, version awareness, env."""

from __future__ import annotations

import pytest

from entrypoint.config.settings import Settings
from entrypoint.config_resolver import resolve
from entrypoint.resolve.gpu import simulate_gpus
from entrypoint.resolve.vllm_caps import load_snapshot
from entrypoint.utils.errors import ConfigError
from entrypoint.utils.response_format import ResponseFormat
from tests.entrypoint.resolver_cases import CAPS, SCHEMES, TUNED, model, settings

# (scheme, gpu, moe_backend passed, effective backend) — vLLM 0.32 facts (the FP8 rows are checked against the installed
# vLLM's own oracle in tests/entrypoint/resolve/test_backends_vllm.py).
DECISIONS = [
    pytest.param("native fp8 static", "H200", "triton", "triton", id="H200 native fp8 static goes to Triton by rule"),
    pytest.param("native fp8 static", "H100", "triton", "triton", id="H100 native fp8 static goes to Triton by rule"),
    pytest.param("modelopt fp8", "H200", "triton", "triton", id="H200 ModelOpt fp8 goes to Triton by rule"),
    pytest.param("ct tensor static", "H200", "triton", "triton", id="H200 compressed-tensors tensor static to Triton"),
    pytest.param(
        "native fp8 dynamic", "H200", "auto", "triton", id="H200 fp8 dynamic is left to vLLM which picks Triton"
    ),
    pytest.param("fp8 block", "H200", "auto", "triton", id="H200 block fp8 is left to vLLM which picks Triton"),
    pytest.param("ct channel token", "H200", "auto", "cutlass", id="H200 channel x token is left to vLLM CUTLASS"),
    pytest.param(
        "native fp8 static", "B200", "auto", "flashinfer_trtllm", id="B200 fp8 static stays with vLLM TRT-LLM"
    ),
    pytest.param("fp8 block", "B200", "auto", "flashinfer_trtllm", id="B200 block fp8 stays with vLLM TRT-LLM"),
    pytest.param("native fp8 static", "A100", "auto", "marlin", id="A100 fp8 falls back to weight-only Marlin"),
    pytest.param(
        "native fp8 static", "L40S", "auto", "triton", id="L40S fp8 static is left to vLLM which picks Triton"
    ),
    pytest.param("bf16", "H200", "auto", "triton", id="H200 bf16 is left to vLLM which picks Triton"),
    pytest.param("mxfp4", "H200", "auto", "triton", id="H200 MXFP4 runs OpenAI triton kernels"),
    pytest.param("nvfp4", "H200", "auto", "humming", id="H200 NVFP4 is weight-only through Humming"),
    pytest.param("nvfp4", "B200", "auto", "flashinfer_trtllm", id="B200 NVFP4 runs FlashInfer TRT-LLM"),
    pytest.param("nvfp4", "sm_120", "auto", "flashinfer_cutlass", id="SM120 NVFP4 runs FlashInfer CUTLASS"),
    pytest.param("nvfp4", "A100", "auto", "marlin", id="A100 NVFP4 is weight-only through Marlin"),
    pytest.param("gptq int4", "H200", "auto", "humming", id="H200 GPTQ runs Humming ahead of Marlin"),
    pytest.param("gptq int4", "A100", "auto", "marlin", id="A100 GPTQ runs Marlin"),
    pytest.param("bf16", "sm_120", "auto", "flashinfer_cutlass", id="SM120 bf16 runs FlashInfer CUTLASS"),
    pytest.param("bf16", "cpu", "auto", "cpu", id="CPU bf16 MoE runs the CPU kernel"),
]

# Where vLLM 0.26 picks otherwise (its oracles have no prioritize_humming step: Marlin ahead of Humming everywhere).
DECISIONS_026 = [
    pytest.param("nvfp4", "H200", "marlin", id="0.26 H200 NVFP4 is weight-only through Marlin"),
    pytest.param("gptq int4", "H200", "marlin", id="0.26 H200 GPTQ runs Marlin"),
    pytest.param("native fp8 dynamic", "H200", "triton", id="0.26 H200 fp8 dynamic picks Triton as 0.32 does"),
]


@pytest.mark.parametrize(("scheme", "gpu", "effective"), DECISIONS_026)
def test_decisions_for_vllm_026(scheme, gpu, effective):
    plan = resolve(settings(), model(scheme), simulate_gpus(gpu), load_snapshot("0.26.0"))
    assert plan.effective_moe_backend == effective and plan.vllm_version == "0.26.0"


@pytest.mark.parametrize(("scheme", "gpu", "passed", "effective"), DECISIONS)
def test_decisions(scheme, gpu, passed, effective):
    plan = resolve(settings(), model(scheme), simulate_gpus(gpu), CAPS)
    assert plan.moe_backend == passed
    assert plan.effective_moe_backend == effective
    assert ("--moe-backend" in plan.vllm_args) == (passed != "auto")
    assert any(reason.startswith("moe_backend:") for reason in plan.reasons)


def test_a_dense_model_has_no_effective_moe_backend():
    plan = resolve(settings(), model("native fp8 static", moe=False), simulate_gpus("H200"), CAPS)
    assert plan.effective_moe_backend is None
    assert plan.moe_backend == "auto"


def test_the_triton_rule_names_its_evidence_page_in_one_line():
    plan = resolve(settings(), model("native fp8 static"), simulate_gpus("H200"), CAPS)
    assert plan.moe_backend_source == "rule:fp8-tensor-static-hopper-triton"
    (line,) = [reason for reason in plan.reasons if reason.startswith("moe_backend:")]
    assert "flashinfer_cutlass" in line and line.endswith("; docs/results/backend-rule.md")
    assert len(line) <= 200


# ---- user overrides --------------------------------------------------------------------------

VALID_OVERRIDES = [
    pytest.param("native fp8 static", "H200", "flashinfer_cutlass", id="flashinfer_cutlass on H200 fp8 static"),
    pytest.param("native fp8 static", "H200", "Flashinfer-Cutlass", id="dashes and case are normalised like vLLM"),
    pytest.param("fp8 block", "H200", "deep_gemm", id="deep_gemm on H200 block fp8"),
    pytest.param("ct channel token", "H200", "triton", id="triton on H200 channel x token"),
    pytest.param("native fp8 static", "B200", "triton", id="triton beats the rule-free B200 default when asked"),
    pytest.param("bf16", "H200", "flashinfer_cutlass", id="flashinfer_cutlass on H200 bf16"),
]


@pytest.mark.parametrize(("scheme", "gpu", "value"), VALID_OVERRIDES)
def test_a_valid_user_override_always_wins(scheme, gpu, value):
    plan = resolve(settings(moe_backend=value), model(scheme), simulate_gpus(gpu), CAPS)
    normalised = value.lower().replace("-", "_")
    assert plan.moe_backend == normalised
    assert plan.moe_backend_source == "option.moe_backend"
    index = plan.vllm_args.index("--moe-backend")
    assert plan.vllm_args[index + 1] == normalised


REFUSED_OVERRIDES = [
    pytest.param("native fp8 static", "H200", "flashinfer_trtllm", "SM100 family", id="flashinfer_trtllm on SM90"),
    pytest.param("native fp8 static", "H200", "deep_gemm", "128x128 block", id="deep_gemm on per-tensor fp8"),
    pytest.param("native fp8 static", "H200", "cutlass", "compressed-tensors and online", id="cutlass on native fp8"),
    pytest.param("native fp8 static", "H200", "tritn", "did you mean triton", id="a misspelling"),
    pytest.param("native fp8 static", "H200", "aiter", "ROCm", id="a ROCm backend on an NVIDIA GPU"),
    pytest.param("native fp8 static", "H200", "hpc", "optional kernel package", id="hpc without its package"),
    pytest.param("native fp8 static", "H200", "triton_unfused", "does not offer it for fp8", id="a non-fp8 backend"),
    pytest.param(
        "native fp8 dynamic", "H200", "flashinfer_cutlass", "static activation", id="FI CUTLASS on dynamic fp8"
    ),
    pytest.param("native fp8 static", "A100", "triton", "SM89 or newer", id="triton fp8 on Ampere"),
    pytest.param("bf16", "cpu", "triton", "CPU engine has a single MoE backend", id="any override on CPU"),
    pytest.param("bf16", "H200", "deep_gemm", "does not offer it for unquantized", id="deep_gemm on bf16"),
]


@pytest.mark.parametrize(("scheme", "gpu", "value", "message"), REFUSED_OVERRIDES)
def test_a_bad_override_is_refused_with_key_value_reason_and_alternatives(scheme, gpu, value, message):
    with pytest.raises(ConfigError) as caught:
        resolve(settings(moe_backend=value), model(scheme), simulate_gpus(gpu), CAPS)
    text = str(caught.value)
    assert text.startswith(f"option.moe_backend={value!r}")
    assert message in text
    assert "Accepted: auto" in text


def test_the_accepted_list_only_names_backends_that_would_run():
    with pytest.raises(ConfigError) as caught:
        resolve(settings(moe_backend="deep_gemm"), model("native fp8 static"), simulate_gpus("H200"), CAPS)
    assert caught.value.accepted == "auto, triton, flashinfer_cutlass, marlin, humming"


# ---- version awareness -----------------------------------------------------------------------


def test_before_0_17_the_rule_uses_that_eras_environment_variables():
    plan = resolve(settings(), model("native fp8 static"), simulate_gpus("H200"), load_snapshot("0.16.0"))
    assert "--moe-backend" not in plan.vllm_args
    assert plan.env["VLLM_USE_FLASHINFER_MOE_FP8"] == "0"
    assert plan.effective_moe_backend == "triton"


def test_before_0_17_an_override_without_an_env_switch_is_refused():
    with pytest.raises(ConfigError, match="has no --moe-backend"):
        resolve(
            settings(moe_backend="marlin"), model("native fp8 static"), simulate_gpus("H200"), load_snapshot("0.15.1")
        )


@pytest.mark.parametrize("version", ["0.24.0", "0.26.0", "0.32.0"])
def test_from_0_24_the_removed_flashinfer_variables_are_never_exported(version):
    # Every scheme on both GPUs resolves (it used to skip refusals with `continue` and count nothing).
    plans = [
        resolve(settings(), model(scheme), simulate_gpus(gpu), load_snapshot(version))
        for scheme in SCHEMES
        for gpu in ("H200", "B200")
    ]
    assert len(plans) == 2 * len(SCHEMES)
    for plan in plans:
        assert not any(name.startswith("VLLM_USE_FLASHINFER_MOE") for name in plan.env)
        assert plan.env.get("VLLM_USE_DEEP_GEMM") != "1"


def test_before_0_17_the_same_check_does_see_the_era_variable():
    # The assertion above can fail: on 0.16 the Triton rule is exported through VLLM_USE_FLASHINFER_MOE_FP8.
    plan = resolve(settings(), model("native fp8 static"), simulate_gpus("H200"), load_snapshot("0.16.0"))
    assert any(name.startswith("VLLM_USE_FLASHINFER_MOE") for name in plan.env)


def test_a_user_flashinfer_variable_is_reported_as_ignored_from_0_24():
    plan = resolve(
        settings(),
        model("native fp8 static"),
        simulate_gpus("H200"),
        CAPS,
        environ={"VLLM_USE_FLASHINFER_MOE_FP8": "1"},
    )
    assert any("VLLM_USE_FLASHINFER_MOE_FP8 is ignored" in reason for reason in plan.reasons)


def test_vllm_use_deep_gemm_on_per_tensor_fp8_is_refused_before_loading():
    with pytest.raises(ConfigError, match="VLLM_USE_DEEP_GEMM='1'.*forces DeepGEMM"):
        resolve(
            settings(), model("native fp8 static"), simulate_gpus("H200"), CAPS, environ={"VLLM_USE_DEEP_GEMM": "1"}
        )


# ---- tuned configs, CPU, misc ----------------------------------------------------------------


def test_triton_gets_the_tuned_config_folder_and_names_the_matching_file():
    plan = resolve(settings(), model("native fp8 static"), simulate_gpus("H200"), CAPS, tuned=(TUNED,))
    assert plan.env["VLLM_TUNED_CONFIG_FOLDER"] == "/opt/configs"
    assert any("E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json: baked file matches" in r for r in plan.reasons)


def test_tensor_parallelism_changes_the_expected_file_name():
    plan = resolve(
        settings(tensor_parallel_degree="2"), model("native fp8 static"), simulate_gpus("H200", 2), CAPS, tuned=(TUNED,)
    )
    assert any("E=128,N=384," in r and "no file for this shape in the image" in r for r in plan.reasons)
    # no folder without the shape's file: vLLM would read only its LoRA and Mamba configs there
    assert "VLLM_TUNED_CONFIG_FOLDER" not in plan.env


def test_a_user_tuned_folder_is_left_alone():
    plan = resolve(
        settings(),
        model("native fp8 static"),
        simulate_gpus("H200"),
        CAPS,
        tuned=(TUNED,),
        environ={"VLLM_TUNED_CONFIG_FOLDER": "/mine"},
    )
    assert "VLLM_TUNED_CONFIG_FOLDER" not in plan.env


def test_flashinfer_does_not_get_the_tuned_folder():
    plan = resolve(
        settings(moe_backend="flashinfer_cutlass"),
        model("native fp8 static"),
        simulate_gpus("H200"),
        CAPS,
        tuned=(TUNED,),
    )
    # no tile folder; vLLM's kernel named (so a stray variable cannot turn ours on); the warm-up
    # (tests/entrypoint/resolve); LMI's answer format (test_response_format)
    assert plan.env == {"MOE_WARMUP": "on", "MOE_SERVING_MOE_KERNEL": "vllm", **ResponseFormat().env()}


@pytest.mark.parametrize("scheme", ["native fp8 static", "fp8 block", "nvfp4", "mxfp4"])
def test_a_low_precision_checkpoint_on_the_cpu_is_refused_clearly(scheme):
    with pytest.raises(ConfigError, match="cannot run on the CPU engine"):
        resolve(settings(), model(scheme), simulate_gpus("cpu"), CAPS)


def test_the_cpu_engine_runs_eager_unless_the_user_says_otherwise():
    assert "--enforce-eager" in resolve(settings(), model("bf16"), simulate_gpus("cpu"), CAPS).vllm_args
    plan = resolve(settings(enforce_eager="false"), model("bf16"), simulate_gpus("cpu"), CAPS)
    assert "--enforce-eager" not in plan.vllm_args and "--no-enforce-eager" in plan.vllm_args


def test_the_cpu_engine_runs_without_chunked_prefill_unless_the_user_says_otherwise():
    # tests/e2e/test_seeded_burst.py: the seeded burst that killed vLLM 0.32's CPU engine with chunked prefill on
    cpu_caps = load_snapshot("0.32.0")
    plan = resolve(settings(), model("bf16"), simulate_gpus("cpu"), cpu_caps)
    assert "--no-enable-chunked-prefill" in plan.vllm_args
    assert any(r.startswith("enable_chunked_prefill: off for the CPU engine (") for r in plan.reasons)
    mine = resolve(settings(enable_chunked_prefill="true"), model("bf16"), simulate_gpus("cpu"), cpu_caps)
    assert "--no-enable-chunked-prefill" not in mine.vllm_args and "--enable-chunked-prefill" in mine.vllm_args
    assert not any(r.startswith("enable_chunked_prefill:") for r in mine.reasons)
    # a user's step budget: without chunking vLLM would refuse prompts longer than it, so vLLM's default stays
    budget = resolve(settings(max_rolling_batch_prefill_tokens="512"), model("bf16"), simulate_gpus("cpu"), cpu_caps)
    assert not any("chunked-prefill" in arg for arg in budget.vllm_args)
    assert any(r.startswith("enable_chunked_prefill: left to vLLM on the CPU engine") for r in budget.reasons)
    gpu = resolve(settings(), model("native fp8 static"), simulate_gpus("H200"), CAPS)
    assert not any("chunked-prefill" in arg for arg in gpu.vllm_args)  # the GPU engine keeps vLLM's default


def test_moe_kernel_project_is_refused_without_a_dispatch_table():
    # tests/entrypoint/resolve/test_moe_kernel.py has the cases with the shipped table
    with pytest.raises(ConfigError, match="option.moe_kernel='project': .*no dispatch table is installed"):
        resolve(settings(moe_kernel="project"), model("native fp8 static"), simulate_gpus("H200"), CAPS)


def test_the_plan_always_binds_the_sagemaker_port_and_installs_the_middleware():
    plan = resolve(Settings.from_options({"model_id": "/m"}, port=9000), model("bf16"), simulate_gpus("H200"), CAPS)
    args = list(plan.vllm_args)
    assert args[0] == "/m"
    assert args[args.index("--port") + 1] == "9000"
    assert args[args.index("--middleware") + 1] == "entrypoint.lmi.middleware.LMIMiddleware"


def test_an_s3_model_is_marked_for_download():
    plan = resolve(Settings.from_options({"model_id": "s3://b/p"}), model("bf16"), simulate_gpus("H200"), CAPS)
    assert plan.fetch_model
