"""The resolver under any option set: argv elements, never shell strings; a validated backend or a ConfigError."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, find, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from entrypoint.config.moe import MoeBackend
from entrypoint.config_resolver import resolve
from entrypoint.resolve.gpu import simulate_gpus
from entrypoint.resolve.plan import Plan
from entrypoint.resolve.tuned_configs import TunedConfigIndex
from entrypoint.utils.errors import ConfigError
from tests.entrypoint.resolver_cases import CAPS, SCHEMES, model, settings

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
@example(inputs=({"served_model_name": "- "}, "bf16", "H200"))  # a value that starts with "-": `--flag=value`
def test_any_option_set_gives_argv_elements_and_a_validated_backend_or_a_config_error(inputs):
    options, scheme, gpu = inputs
    plan = _resolve_fuzzed(options, scheme, gpu)
    if isinstance(plan, ConfigError):
        # A refusal names what the user set: one of the options (or a pair of twins), or the model on the CPU.
        named = [part.strip().removeprefix("option.") for part in plan.key.split(" / ")]
        assert (plan.key == "model" and gpu == "cpu") or all(key in options for key in named), plan
        return
    assert all(isinstance(arg, str) for arg in plan.vllm_args)
    # No element was glued from several values: every flag is one element and starts with --. A value that starts
    # with "-" travels as `--flag=value` (engine_args._render), so its name is checked, not the value it carries
    # (hypothesis, 2026-12-06: served_model_name "- " became `--served-model-name=- `, one element, as meant).
    flags = [a for a in plan.vllm_args[1:] if a.startswith("--")]
    assert all(re.fullmatch(r"--[a-z0-9-]+", f.split("=", 1)[0]) for f in flags), flags
    for glued in (f for f in flags if "=" in f):
        value = glued.split("=", 1)[1]
        assert value.startswith("-") and value in options.values(), glued  # a user's value, whole
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
