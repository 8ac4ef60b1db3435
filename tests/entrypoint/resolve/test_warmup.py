"""option.warmup in the resolver: what `auto` means on a GPU, on the CPU engine and with several API servers, and
that an explicit setting wins or is refused with the key, the value and what would work."""

from __future__ import annotations

import pytest

from entrypoint.caches import compile_layer
from entrypoint.config.warmup import Warmup, parse_warmup
from entrypoint.config_resolver import resolve
from entrypoint.resolve.gpu import simulate_gpus
from entrypoint.resolve.vllm_caps import load_snapshot
from entrypoint.utils.errors import ConfigError
from entrypoint.warmup import MAX_SAMPLED_BATCH_ENV, WARMUP_ENV
from tests.entrypoint.resolver_cases import CAPS, model, settings

CPU_CAPS = load_snapshot("0.32.0")


def reason(plan) -> str:
    (line,) = [r for r in plan.reasons if r.startswith("warmup: ")]
    return line


def test_auto_warms_a_gpu_engine_up_and_says_why():
    plan = resolve(settings(), model("native fp8 static"), simulate_gpus("H200"), CAPS)
    assert plan.env[WARMUP_ENV] == "on" and MAX_SAMPLED_BATCH_ENV not in plan.env
    assert reason(plan).startswith("warmup: on (auto: vLLM compiles MoE and sampler Triton kernels on a shape's first")
    assert reason(plan).endswith("; docs/results/start-time.md)")


def test_auto_leaves_the_cpu_engine_cold_and_says_why():
    plan = resolve(settings(), model("bf16"), simulate_gpus("cpu"), CPU_CAPS)
    assert plan.env[WARMUP_ENV] == "off"
    assert reason(plan) == (
        "warmup: off (auto: the CPU engine runs eager and compiles no kernels on a shape's first request)"
    )


def test_auto_is_off_where_vllm_starts_one_api_server_per_data_parallel_rank():
    plan = resolve(settings(data_parallel_size="2"), model("native fp8 static"), simulate_gpus("H200", 2), CAPS)
    assert plan.env[WARMUP_ENV] == "off"
    assert reason(plan) == "warmup: off (auto: 2 API server processes would each hold only their own /ping)"


@pytest.mark.parametrize("text", ["on", "true", "ON ", "1"])
def test_an_explicit_on_wins_on_the_cpu_engine_with_its_seeded_batch_cap(text: str):
    plan = resolve(settings(warmup=text), model("bf16"), simulate_gpus("cpu"), CPU_CAPS)
    assert plan.env[WARMUP_ENV] == "on" and plan.env[MAX_SAMPLED_BATCH_ENV] == "8"
    assert reason(plan).startswith("warmup: on (option.warmup): the server sends itself the bake's requests")
    assert reason(plan).endswith("seeded batches capped at 8 (a CPU engine crash, docs/reference/cpu-vllm.md)")


@pytest.mark.parametrize("text", ["off", "false", "0"])
def test_an_explicit_off_wins_on_a_gpu(text: str):
    plan = resolve(settings(warmup=text), model("native fp8 static"), simulate_gpus("H200"), CAPS)
    assert plan.env[WARMUP_ENV] == "off" and reason(plan) == "warmup: off (option.warmup)"


def test_an_explicit_on_with_several_api_servers_is_refused_before_anything_loads():
    with pytest.raises(ConfigError) as err:
        resolve(settings(warmup="on", data_parallel_size="2"), model("native fp8 static"), simulate_gpus("H200", 2),
                CAPS)  # fmt: skip
    assert str(err.value).startswith("option.warmup='on': needs one API server process, and vLLM starts 2 here")
    assert str(err.value).endswith("Accepted: off, or one API server")


def test_a_bad_value_names_the_key_the_value_and_the_choices():
    with pytest.raises(ConfigError) as err:
        parse_warmup("sometimes", "OPTION_WARMUP (option.warmup)")
    assert (
        str(err.value)
        == "OPTION_WARMUP (option.warmup)='sometimes': unknown value. Accepted: auto, on, off, true, false"
    )
    assert parse_warmup(None) is Warmup.AUTO and parse_warmup("") is Warmup.AUTO


def test_the_warmup_setting_is_not_part_of_the_compile_cache_key():
    # the bake turns the warm-up off (its own traffic is the same requests): a layer must fit a serve that warms up
    on = resolve(settings(warmup="on"), model("native fp8 static"), simulate_gpus("H200"), CAPS)
    off = resolve(settings(warmup="off"), model("native fp8 static"), simulate_gpus("H200"), CAPS)
    assert on.env != off.env and compile_layer.plan_digest(on) == compile_layer.plan_digest(off)
