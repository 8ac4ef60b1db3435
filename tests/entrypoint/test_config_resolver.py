"""The resolver as a pure function: decisions per scheme × GPU, overrides, version awareness, env."""

from __future__ import annotations

import pytest
from hypothesis import find, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from entrypoint.config.moe import MoeBackend
from entrypoint.config.settings import Settings
from entrypoint.config_resolver import resolve
from entrypoint.model.types import (
    ActivationScheme as A,
)
from entrypoint.model.types import (
    Granularity as G,
)
from entrypoint.model.types import (
    ModelDescription,
    MoEShape,
    Quantization,
)
from entrypoint.model.types import (
    QuantFamily as F,
)
from entrypoint.model.types import (
    WeightDtype as W,
)
from entrypoint.resolve.gpu import simulate_gpus
from entrypoint.resolve.plan import Plan, PlanQuantization
from entrypoint.resolve.tuned_configs import TunedConfigIndex
from entrypoint.resolve.vllm_caps import PINNED_VLLM_VERSION, load_snapshot
from entrypoint.utils.errors import ConfigError
from entrypoint.utils.response_format import ResponseFormat

CAPS = load_snapshot(PINNED_VLLM_VERSION)  # the image's vLLM (0.32.0)
QWEN3_MOE = MoEShape(num_experts=128, top_k=8, hidden_size=2048, expert_intermediate_size=768)

SCHEMES = {
    "native fp8 static": Quantization(
        family=F.FP8,
        method="fp8",
        weight_dtype=W.FP8,
        weight_granularity=G.TENSOR,
        activation_dtype=W.FP8,
        activation_scheme=A.STATIC,
        activation_granularity=G.TENSOR,
    ),
    "native fp8 dynamic": Quantization(
        family=F.FP8,
        method="fp8",
        weight_dtype=W.FP8,
        weight_granularity=G.TENSOR,
        activation_dtype=W.FP8,
        activation_scheme=A.DYNAMIC,
        activation_granularity=G.TENSOR,
    ),
    "fp8 block": Quantization(
        family=F.FP8,
        method="fp8",
        weight_dtype=W.FP8,
        weight_granularity=G.BLOCK,
        block_shape=(128, 128),
        activation_dtype=W.FP8,
        activation_scheme=A.DYNAMIC,
        activation_granularity=G.GROUP,
    ),
    "modelopt fp8": Quantization(
        family=F.MODELOPT,
        method="modelopt",
        weight_dtype=W.FP8,
        weight_granularity=G.TENSOR,
        activation_dtype=W.FP8,
        activation_scheme=A.STATIC,
        activation_granularity=G.TENSOR,
    ),
    "ct tensor static": Quantization(
        family=F.COMPRESSED_TENSORS,
        method="compressed-tensors",
        weight_dtype=W.FP8,
        weight_granularity=G.TENSOR,
        activation_dtype=W.FP8,
        activation_scheme=A.STATIC,
        activation_granularity=G.TENSOR,
    ),
    "ct channel token": Quantization(
        family=F.COMPRESSED_TENSORS,
        method="compressed-tensors",
        weight_dtype=W.FP8,
        weight_granularity=G.CHANNEL,
        activation_dtype=W.FP8,
        activation_scheme=A.DYNAMIC,
        activation_granularity=G.TOKEN,
    ),
    "bf16": Quantization(),
    "mxfp4": Quantization(family=F.MXFP4, method="mxfp4", weight_dtype=W.MXFP4, weight_granularity=G.GROUP),
    "nvfp4": Quantization(
        family=F.MODELOPT,
        method="modelopt_fp4",
        weight_dtype=W.NVFP4,
        weight_granularity=G.GROUP,
        activation_dtype=W.NVFP4,
        activation_scheme=A.DYNAMIC,
        activation_granularity=G.GROUP,
    ),
    "gptq int4": Quantization(family=F.GPTQ, method="gptq", weight_dtype=W.INT4, weight_granularity=G.GROUP),
}


def model(scheme: str, moe: bool = True) -> ModelDescription:
    return ModelDescription(source="/models/m", moe=QWEN3_MOE if moe else None, quantization=SCHEMES[scheme])


def settings(**options: str) -> Settings:
    return Settings.from_options({"model_id": "/models/m", **options})


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

TUNED = TunedConfigIndex("/opt/configs", frozenset({"E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json"}))


def test_triton_gets_the_tuned_config_folder_and_names_the_matching_file():
    plan = resolve(settings(), model("native fp8 static"), simulate_gpus("H200"), CAPS, tuned=(TUNED,))
    assert plan.env["VLLM_TUNED_CONFIG_FOLDER"] == "/opt/configs"
    assert any("E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json: baked file matches" in r for r in plan.reasons)


def test_tensor_parallelism_changes_the_expected_file_name():
    plan = resolve(
        settings(tensor_parallel_degree="2"), model("native fp8 static"), simulate_gpus("H200", 2), CAPS, tuned=(TUNED,)
    )
    assert any("E=128,N=384," in r and "no file for this shape in the image" in r for r in plan.reasons)


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
    # nothing of the MoE kernels' (the warm-up: tests/entrypoint/resolve; LMI's answer format: test_response_format)
    assert plan.env == {"MOE_WARMUP": "on", **ResponseFormat().env()}


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


# ---- properties ------------------------------------------------------------------------------

OPTION_KEYS = st.sampled_from(
    [
        "max_model_len",
        "moe_backend",
        "dtype",
        "tensor_parallel_degree",
        "enable_prefix_caching",
        "served_model_name",
        "speculative_config",
        "kv_cache_dtype",
        "max_rolling_batch_size",
        "gpu_memory_utilization",
        "rolling_batch",
        "unknown_thing",
        "enforce_eager",
        "quantization",
        "seed",
        "enable_expert_parallel",
    ]
)
SHELLY = st.text(alphabet=st.sampled_from(list("ab1 ;|&$`'\"()<>*?\\\n{}[],:=-_.")), max_size=20)


# Every backend name as well as junk: with "triton" the only name, the user-backend path was never reached.
BACKEND_VALUES = st.sampled_from([b.value for b in MoeBackend] + ["Flashinfer-Cutlass", "tritn", ""])
FUZZ_INPUTS = st.tuples(
    st.dictionaries(
        OPTION_KEYS, st.one_of(SHELLY, st.sampled_from(["true", "false", "4", "bf16", "triton", "max", '{"a": 1}']))
    ).flatmap(lambda options: st.just(options) | BACKEND_VALUES.map(lambda b: {**options, "moe_backend": b})),
    st.sampled_from(sorted(SCHEMES)),
    st.sampled_from(["H200", "H100", "B200", "A100", "cpu"]),
)


def _resolve_fuzzed(options: dict[str, str], scheme: str, gpu: str) -> Plan | ConfigError:
    try:
        return resolve(settings(**options), model(scheme), simulate_gpus(gpu, 8 if gpu != "cpu" else None), CAPS)
    except ConfigError as exc:
        return exc


@hsettings(max_examples=300, deadline=None)
@given(inputs=FUZZ_INPUTS)
def test_any_option_set_gives_argv_elements_and_a_validated_backend_or_a_config_error(inputs):
    options, scheme, gpu = inputs
    plan = _resolve_fuzzed(options, scheme, gpu)
    if isinstance(plan, ConfigError):
        # A refusal names what the user set: one of the options (or a pair of twins), or the model on the CPU.
        named = [part.strip().removeprefix("option.") for part in plan.key.split(" / ")]
        assert (plan.key == "model" and gpu == "cpu") or all(key in options for key in named), plan
        return
    assert all(isinstance(arg, str) for arg in plan.vllm_args)
    # No element was glued from several values: every flag is one element and starts with --.
    flags = [a for a in plan.vllm_args[1:] if a.startswith("--")]
    assert all(" " not in f for f in flags)
    assert ("--moe-backend" in plan.vllm_args) == (plan.moe_backend != "auto")
    if plan.moe_backend != "auto":
        value = plan.vllm_args[plan.vllm_args.index("--moe-backend") + 1]
        assert value in CAPS.moe_backend_values
        assert value == plan.moe_backend
        # Validated: the predicate for this scheme on this GPU accepts it.
        from entrypoint.resolve.backends import backend_support

        sm = simulate_gpus(gpu).sm
        assert gpu == "cpu" or not model(scheme).is_moe or backend_support(value, SCHEMES[scheme], sm) is None


@pytest.mark.parametrize(
    ("outcome", "holds"),
    [
        (
            "a plan passing the user's backend",
            lambda r: isinstance(r, Plan) and r.moe_backend_source == "option.moe_backend",
        ),
        ("a plan passing a rule's backend", lambda r: isinstance(r, Plan) and r.moe_backend_source.startswith("rule:")),
        ("a plan leaving the backend to vLLM", lambda r: isinstance(r, Plan) and r.moe_backend == "auto"),
        ("a refusal of an option", lambda r: isinstance(r, ConfigError) and r.key.startswith("option.")),
    ],
)
def test_the_fuzzed_inputs_reach_every_outcome(outcome, holds):
    # The property above returns early on refusals; this shows its inputs also reach every kind of plan.
    find(FUZZ_INPUTS, lambda inputs: holds(_resolve_fuzzed(*inputs)), settings=hsettings(max_examples=2000))


VALID_VALUES = {
    "max_model_len": st.integers(1, 1 << 20).map(str),
    "enable_prefix_caching": st.sampled_from(["true", "false", "TRUE"]),
    "enforce_eager": st.sampled_from(["true", "false"]),
    "served_model_name": SHELLY.filter(lambda s: s.strip() != "" and s == s.strip()),
    "speculative_config": st.sampled_from(['{"method": "ngram", "num_speculative_tokens": 3}', '{"a": [1, 2]}']),
    "gpu_memory_utilization": st.floats(0.1, 0.99).map(lambda f: f"{f:.2f}"),
    "seed": st.integers(0, 2**31).map(str),
}


@hsettings(max_examples=200, deadline=None)
@given(options=st.fixed_dictionaries({}, optional=VALID_VALUES))
def test_valid_options_pass_through_as_separate_argv_elements(options):
    plan = resolve(settings(**options), model("native fp8 static"), simulate_gpus("H200"), CAPS)
    args = list(plan.vllm_args)
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value.lower() in ("true", "false"):
            expected = flag if value.lower() == "true" else "--no-" + key.replace("_", "-")
            assert expected in args
        elif value.startswith("-"):  # vLLM's parser would read a separate "-x" as a flag: one --flag=value element
            assert f"{flag}={value}" in args
        else:
            assert args[args.index(flag) + 1] == value  # the value intact, as its own element


def test_the_image_config_folder_is_found_through_its_variable(tmp_path):
    from entrypoint.resolve.tuned_configs import default_config_dir

    (tmp_path / "E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json").write_text("{}")
    index = TunedConfigIndex.scan(default_config_dir({"MOE_SERVING_KERNEL_CONFIGS": str(tmp_path)}))
    plan = resolve(settings(), model("native fp8 static"), simulate_gpus("H200"), CAPS, tuned=(index,))
    assert plan.env["VLLM_TUNED_CONFIG_FOLDER"] == str(tmp_path)


def test_the_shipped_configs_cover_the_first_rule_models():
    # Qwen3-30B-A3B and Mixtral-8x7B FP8 static at TP1 on an H200: the rule's Triton run has tuned tiles.
    index = TunedConfigIndex.scan()
    assert index is not None
    assert "E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json" in index.names
    assert "E=8,N=14336,device_name=NVIDIA_H200,dtype=fp8_w8a8.json" in index.names


def test_the_middleware_path_in_every_plan_imports_the_lmi_middleware():
    import importlib

    from entrypoint.config_resolver import MIDDLEWARE
    from entrypoint.lmi.middleware import LMIMiddleware

    module, _, name = MIDDLEWARE.rpartition(".")
    assert getattr(importlib.import_module(module), name) is LMIMiddleware


def test_expert_parallelism_splits_the_experts_in_the_expected_file_name():
    plan = resolve(
        settings(tensor_parallel_degree="2", enable_expert_parallel="true"),
        model("native fp8 static"),
        simulate_gpus("H200", 2),
        CAPS,
        tuned=(TUNED,),
    )
    # kernels.shapes.moe_partition: EP keeps each expert whole (N=768) and gives each GPU 128/2 experts
    assert any(
        "E=64,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json: no file for this shape in the image" in r
        for r in plan.reasons
    )


QWEN3_235B_BLOCK = ModelDescription(
    source="/models/qwen3-235b-a22b-fp8",
    moe=MoEShape(num_experts=128, top_k=8, hidden_size=4096, expert_intermediate_size=1536),
    quantization=SCHEMES["fp8 block"],
)


@pytest.mark.parametrize(
    ("options", "gpus"),
    [
        pytest.param({"tensor_parallel_degree": "4"}, 4, id="TP4 leaves 384 columns per GPU: three whole blocks"),
        pytest.param(
            {"tensor_parallel_degree": "8", "enable_expert_parallel": "true"}, 8, id="TP8 EP8 keeps experts whole"
        ),
    ],
)
def test_a_block_fp8_split_into_whole_blocks_is_planned(options: dict[str, str], gpus: int) -> None:
    plan = resolve(settings(**options), QWEN3_235B_BLOCK, simulate_gpus("H200", gpus), CAPS)
    assert plan.effective_moe_backend in ("triton", "flashinfer_cutlass")


def test_a_block_fp8_split_through_a_block_is_refused_before_vllm_026_loads_anything() -> None:
    # vLLM 0.26 fp8.py create_weights: "The output_size of gate's and up's weight = 192 is not divisible by weight
    # quantization block_n = 128" -- minutes into the start of an 8-GPU engine (Qwen3-235B-A22B-FP8 at TP8).
    with pytest.raises(ConfigError) as refused:
        resolve(
            settings(tensor_parallel_degree="8"), QWEN3_235B_BLOCK, simulate_gpus("H200", 8), load_snapshot("0.26.0")
        )
    assert refused.value.key == "option.tensor_parallel_degree" and refused.value.value == "8"
    assert "192 columns per GPU, not whole 128x128 FP8 blocks" in refused.value.reason
    assert "vLLM 0.26.0 refuses that" in refused.value.reason
    assert refused.value.accepted == "1, 2, 4, option.enable_expert_parallel=true (each GPU holds whole experts)"


def test_vllm_032_refines_the_scale_blocks_of_a_native_fp8_split_and_runs_triton() -> None:
    # 0.32 oracle/fp8.py resolve_fp8_moe_weight_block_shape: gcd(128, 128, 192, 4096) = 64 >= 32, so 64x64 scale
    # blocks (refine_fp8_moe_block_shape), which only Triton takes
    plan = resolve(settings(tensor_parallel_degree="8"), QWEN3_235B_BLOCK, simulate_gpus("H200", 8), CAPS)
    assert plan.moe_backend is MoeBackend.AUTO and plan.effective_moe_backend == "triton"
    assert plan.quantization == PlanQuantization.of(QWEN3_235B_BLOCK.quantization)  # the checkpoint's, as read
    assert (
        "block fp8 split over 8 GPUs: vLLM refines the 128x128 scale blocks to 64x64 for 192 columns per GPU; "
        "only its Triton kernel takes them"
    ) in plan.reasons


def test_vllm_032_pads_a_native_fp8_split_for_a_backend_that_takes_128_blocks_only() -> None:
    # 0.32 pad_tp_shard_to_weight_blocks: an explicit backend that cannot take refined blocks gets 256 columns
    plan = resolve(
        settings(tensor_parallel_degree="8", moe_backend="flashinfer_cutlass"), QWEN3_235B_BLOCK,
        simulate_gpus("H200", 8), CAPS,
    )  # fmt: skip
    assert plan.moe_backend is MoeBackend.FLASHINFER_CUTLASS
    assert (
        "block fp8 split over 8 GPUs: vLLM pads each GPU's 192 expert columns to 256 (whole 128x128 blocks)"
        in plan.reasons
    )


@pytest.mark.parametrize(
    ("width", "quant", "why"),
    [
        pytest.param(1440, SCHEMES["fp8 block"], "no block of at least 32 divides them", id="native, 180 columns"),
        pytest.param(1536, "ct block", "192 columns per GPU are not whole 128x128 blocks", id="compressed-tensors"),
    ],
)
def test_vllm_032_still_refuses_a_split_it_cannot_refine(width: int, quant: object, why: str) -> None:
    if quant == "ct block":
        quant = SCHEMES["fp8 block"].model_copy(update={"family": F.COMPRESSED_TENSORS, "method": "compressed-tensors"})
    described = QWEN3_235B_BLOCK.model_copy(
        update={
            "quantization": quant,
            "moe": QWEN3_235B_BLOCK.moe.model_copy(update={"expert_intermediate_size": width}),
        }
    )
    with pytest.raises(ConfigError) as refused:
        resolve(settings(tensor_parallel_degree="8"), described, simulate_gpus("H200", 8), CAPS)
    assert refused.value.key == "option.tensor_parallel_degree" and why in refused.value.reason
    assert "vLLM 0.32.0 refuses that" in refused.value.reason


def test_per_tensor_fp8_has_no_block_constraint_at_any_split() -> None:
    static = QWEN3_235B_BLOCK.model_copy(update={"quantization": SCHEMES["native fp8 static"]})
    plan = resolve(settings(tensor_parallel_degree="8"), static, simulate_gpus("H200", 8), CAPS)
    assert "--tensor-parallel-size" in plan.vllm_args and plan.moe_backend is MoeBackend.TRITON
