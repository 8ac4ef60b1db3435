"""LMI option names and values → vLLM engine flags; twins, legacy keys, validation errors."""

from __future__ import annotations

import pytest

from entrypoint.resolve.engine_args import build_engine_args
from entrypoint.resolve.gpu import simulate_gpus
from entrypoint.resolve.vllm_caps import load_snapshot
from entrypoint.utils.errors import ConfigError

CAPS = load_snapshot("0.26.0")
H200X8 = simulate_gpus("H200", 8)


def args_for(options: dict[str, str], gpus=H200X8, server: dict[str, str] | None = None) -> list[str]:
    return list(build_engine_args(options, server or {}, CAPS, gpus).args)


MAPPINGS = [
    pytest.param(
        {"tensor_parallel_degree": "max"}, ["--tensor-parallel-size", "8"], id="tensor_parallel_degree max is all GPUs"
    ),
    pytest.param(
        {"tensor_parallel_degree": "-1"}, ["--tensor-parallel-size", "8"], id="tensor_parallel_degree -1 is max too"
    ),
    pytest.param({"tensor_parallel_degree": "4"}, ["--tensor-parallel-size", "4"], id="tensor_parallel_degree 4"),
    pytest.param({"pipeline_parallel_degree": "2"}, ["--pipeline-parallel-size", "2"], id="pipeline_parallel_degree"),
    pytest.param(
        {"max_rolling_batch_size": "64"}, ["--max-num-seqs", "64"], id="max_rolling_batch_size is max_num_seqs"
    ),
    pytest.param(
        {"max_rolling_batch_prefill_tokens": "8192"},
        ["--max-num-batched-tokens", "8192"],
        id="max_rolling_batch_prefill_tokens is max_num_batched_tokens",
    ),
    pytest.param({"quantize": "fp8"}, ["--quantization", "fp8"], id="quantize is quantization"),
    pytest.param({"cpu_offload_gb_per_gpu": "4"}, ["--cpu-offload-gb", "4"], id="cpu_offload_gb_per_gpu"),
    pytest.param({"dtype": "bf16"}, ["--dtype", "bfloat16"], id="dtype bf16"),
    pytest.param({"dtype": "fp16"}, ["--dtype", "float16"], id="dtype fp16"),
    pytest.param({"dtype": "fp32"}, ["--dtype", "float32"], id="dtype fp32"),
    pytest.param({"enable_prefix_caching": "true"}, ["--enable-prefix-caching"], id="true becomes --x"),
    pytest.param({"enable_prefix_caching": "False"}, ["--no-enable-prefix-caching"], id="false becomes --no-x"),
    pytest.param({"enable_expert_parallel": "true"}, ["--enable-expert-parallel"], id="expert parallel passes through"),
    pytest.param(
        {"speculative_config": '{"method": "ngram", "num_speculative_tokens": 4}'},
        ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4}'],
        id="JSON stays one element",
    ),
    pytest.param({"max_model_len": "32768"}, ["--max-model-len", "32768"], id="engine args pass through"),
    pytest.param({"max_model_len": "32k"}, ["--max-model-len", "32k"], id="max_model_len 32k passes unchanged"),
    pytest.param({"max_model_len": "32K"}, ["--max-model-len", "32K"], id="max_model_len 32K (binary)"),
    pytest.param({"max_model_len": "25.6k"}, ["--max-model-len", "25.6k"], id="max_model_len decimal with k"),
    pytest.param({"max_model_len": "auto"}, ["--max-model-len", "auto"], id="max_model_len auto"),
    # a value starting with "-" is one `--flag=value` element: vLLM's parser takes a separate "-0.5" or "-x" for a flag
    pytest.param({"max_model_len": "-1"}, ["--max-model-len=-1"], id="max_model_len -1"),
    pytest.param({"served_model_name": "-x"}, ["--served-model-name=-x"], id="a value starting with a dash"),
    pytest.param(
        {"max_rolling_batch_prefill_tokens": "8k"},
        ["--max-num-batched-tokens", "8k"],
        id="max_rolling_batch_prefill_tokens 8k",
    ),
    pytest.param({"kv_cache_memory_bytes": "2G"}, ["--kv-cache-memory-bytes", "2G"], id="kv_cache_memory_bytes 2G"),
    pytest.param({"kv_cache_dtype": "fp8"}, ["--kv-cache-dtype", "fp8"], id="kv cache dtype passes through"),
    pytest.param(
        {"tensor_parallel_degree": "8", "tensor_parallel_size": "8"},
        ["--tensor-parallel-size", "8"],
        id="twins with the same value are fine",
    ),
    pytest.param(
        {"tensor_parallel_degree": "max", "tensor_parallel_size": "8"},
        ["--tensor-parallel-size", "8"],
        id="twins agree after max is resolved",
    ),
    pytest.param({"rolling_batch": "vllm", "entrypoint": "djl_python.vllm"}, [], id="legacy keys are dropped"),
]


@pytest.mark.parametrize(("options", "expected"), MAPPINGS)
def test_lmi_options_become_vllm_flags(options, expected):
    assert args_for(options) == expected


def test_legacy_and_unknown_keys_are_reported_as_ignored_with_a_hint():
    result = build_engine_args({"rolling_batch": "vllm", "max_modle_len": "5"}, {"engine": "Python"}, CAPS, H200X8)
    assert "option.rolling_batch: legacy LMI setting, not a vLLM 0.26.0 engine argument" in result.ignored
    assert any("max_modle_len" in item and "did you mean option.max_model_len" in item for item in result.ignored)
    assert any(item.startswith("engine:") for item in result.ignored)


def test_tensor_parallel_max_on_cpu_is_one():
    assert args_for({"tensor_parallel_degree": "max"}, gpus=simulate_gpus("cpu")) == ["--tensor-parallel-size", "1"]


ERRORS = [
    pytest.param(
        {"tensor_parallel_degree": "4", "tensor_parallel_size": "2"},
        "option.tensor_parallel_degree / option.tensor_parallel_size",
        "set different values",
        id="twin keys with different values",
    ),
    pytest.param(
        {"max_rolling_batch_size": "8", "max_num_seqs": "16"},
        "option.max_rolling_batch_size / option.max_num_seqs",
        "set different values",
        id="batch size twins",
    ),
    pytest.param(
        {"tensor_parallel_degree": "16"},
        "option.tensor_parallel_degree='16'",
        "only 8 GPU(s)",
        id="more GPUs than visible",
    ),
    pytest.param(
        {"tensor_parallel_degree": "two"},
        "option.tensor_parallel_degree='two'",
        "positive integer",
        id="tp not a number",
    ),
    pytest.param({"dtype": "fp17"}, "option.dtype='fp17'", "unknown dtype", id="a dtype typo"),
    pytest.param(
        {"enable_prefix_caching": "yes"},
        "option.enable_prefix_caching='yes'",
        "Accepted: true, false",
        id="a bad boolean",
    ),
    pytest.param({"max_num_seqs": "4k"}, "option.max_num_seqs='4k'", "must be an integer", id="a bad integer"),
    pytest.param(
        {"max_rolling_batch_size": "\u0663"},
        "option.max_rolling_batch_size='\u0663'",
        "Accepted: a whole number in ASCII digits",
        id="a non-ASCII digit names the LMI key",
    ),
    pytest.param(
        {"max_model_len": "lots"}, "option.max_model_len='lots'", "or auto. Accepted: 32768", id="max_model_len junk"
    ),
    pytest.param(
        {"max_model_len": "1.5K"}, "option.max_model_len='1.5K'", "k/m/g/K/M/G", id="decimal with a binary suffix"
    ),
    pytest.param(
        {"max_rolling_batch_prefill_tokens": "auto"},
        "option.max_rolling_batch_prefill_tokens='auto'",
        "must be an integer or a k/m/g/K/M/G count",
        id="auto only for max_model_len",
    ),
    pytest.param(
        {"tensor_parallel_degree": "\u00b2"},
        "option.tensor_parallel_degree='\u00b2'",
        "positive integer",
        id="a superscript digit tp",
    ),
    pytest.param(
        {"gpu_memory_utilization": "most"},
        "option.gpu_memory_utilization='most'",
        "must be a finite number",
        id="a bad float",
    ),
    pytest.param(
        {"gpu_memory_utilization": "nan"}, "option.gpu_memory_utilization='nan'", "must be a finite number", id="nan"
    ),
    pytest.param(
        {"gpu_memory_utilization": "inf"}, "option.gpu_memory_utilization='inf'", "must be a finite number", id="inf"
    ),
    pytest.param(
        {"gpu_memory_utilization": "٠.٩"}, "option.gpu_memory_utilization='٠.٩'", "must be a finite number", id="arabic"
    ),
    pytest.param(
        {"speculative_config": '{"method": '}, "option.speculative_config=", "not valid JSON", id="broken JSON"
    ),
    pytest.param({"port": "9000"}, "option.port='9000'", "SAGEMAKER_BIND_TO_PORT", id="the port is reserved"),
    pytest.param(  # the same accepted list as for 16 on this 8-GPU host
        {"tensor_parallel_degree": "0"},
        "option.tensor_parallel_degree='0'",
        "Accepted: 1, 2, 3, 4, 5, 6, 7, 8, max",
        id="tp 0 lists what this host runs",
    ),
    pytest.param(
        {"kv_cache_dtype": "bogus"},
        "option.kv_cache_dtype='bogus'",
        "not an accepted value. Accepted: auto",
        id="a kv cache dtype vLLM does not have",
    ),
    # ranges vLLM would check only inside the engine (a traceback minutes into the start)
    pytest.param(
        {"gpu_memory_utilization": "1.5"},
        "option.gpu_memory_utilization='1.5'",
        "out of range. Accepted: a fraction",
        id="gpu memory over 1",
    ),
    pytest.param({"gpu_memory_utilization": "0"}, "option.gpu_memory_utilization='0'", "out of range", id="gpu 0"),
    pytest.param(
        {"gpu_memory_utilization": "-0.5"}, "option.gpu_memory_utilization='-0.5'", "out of range", id="gpu negative"
    ),
    pytest.param({"max_model_len": "-5"}, "option.max_model_len='-5'", "-1 or auto", id="a negative length"),
    pytest.param({"max_model_len": "0"}, "option.max_model_len='0'", "out of range", id="length 0"),
    pytest.param(
        {"max_model_len": "99999999999999999999999"}, "option.max_model_len=", "out of range", id="a huge length"
    ),
    # counts in vLLM's k/m/g/t (x1000) and K/M/G/T (x1024) forms are checked by the number they mean
    pytest.param({"max_model_len": "0k"}, "option.max_model_len='0k'", "out of range", id="a zero k count"),
    pytest.param({"max_model_len": "99999999t"}, "option.max_model_len=", "out of range", id="a huge t count"),
    pytest.param(
        {"max_num_batched_tokens": "0.0k"}, "option.max_num_batched_tokens='0.0k'", "≥ 1", id="a zero decimal count"
    ),
    pytest.param({"max_num_batched_tokens": "2048T"}, "option.max_num_batched_tokens=", "≥ 1", id="a huge T count"),
    pytest.param({"max_rolling_batch_size": "0"}, "option.max_rolling_batch_size='0'", "≥ 1", id="batch size 0"),
    pytest.param(
        {"max_rolling_batch_prefill_tokens": "-1"},
        "option.max_rolling_batch_prefill_tokens='-1'",
        "≥ 1",
        id="negative prefill tokens",
    ),
    pytest.param({"pipeline_parallel_degree": "0"}, "option.pipeline_parallel_degree='0'", "≥ 1", id="pp 0"),
    pytest.param({"cpu_offload_gb_per_gpu": "-1"}, "option.cpu_offload_gb_per_gpu='-1'", "≥ 0", id="offload < 0"),
    pytest.param({"middleware": "x.Y"}, "option.middleware='x.Y'", "always installed", id="the middleware is reserved"),
]


@pytest.mark.parametrize(("options", "key_and_value", "message"), ERRORS)
def test_bad_options_are_refused_naming_key_and_value(options, key_and_value, message):
    with pytest.raises(ConfigError) as caught:
        build_engine_args(options, {}, CAPS, H200X8)
    assert str(caught.value).startswith(key_and_value)
    assert message in str(caught.value)


def test_invalid_json_is_refused_without_echoing_the_value_but_with_where_it_breaks() -> None:
    # a connector config is where a password sits; a trailing comma must not print it
    value = '{"kv_connector":"x","kv_connector_extra_config":{"password":"hunter2"},}'
    with pytest.raises(ConfigError) as caught:
        build_engine_args({"kv_transfer_config": value}, {}, CAPS, H200X8)
    message = str(caught.value)
    assert "hunter2" not in message and "kv_connector" not in message
    assert message.startswith("option.kv_transfer_config='***': is not valid JSON")
    assert f"at line 1 column {len(value)} of its {len(value)} characters" in message


def test_an_unknown_engine_is_refused():
    with pytest.raises(ConfigError, match="engine='DeepSpeed': unknown engine. Accepted: Python, MPI"):
        build_engine_args({}, {"engine": "DeepSpeed"}, CAPS, H200X8)


ORACLE_VALUES = [
    "4096",
    "-1",
    "1_000",
    "32k",
    "32K",
    "25.6k",
    "1.5K",
    "2g",
    "1t",
    "auto",
    "AUTO",
    "4x",
    "k",
    "0x10",
    "",
]


def test_integer_acceptance_matches_vllms_own_parsers():
    """For ASCII input our validator agrees with the installed vLLM's argparse types (imports vLLM: ~5 s)."""
    import argparse

    from vllm.utils.argparse_utils import human_readable_int, human_readable_int_or_auto

    def vllm_accepts(parse, value: str) -> bool:
        try:
            parse(value)
        except (ValueError, argparse.ArgumentTypeError):
            return False
        return True

    for key, parse in (
        ("max_model_len", human_readable_int_or_auto),
        ("max_num_batched_tokens", human_readable_int),
        ("max_num_seqs", int),
    ):
        for value in ORACLE_VALUES:
            try:
                build_engine_args({key: value}, {}, CAPS, H200X8)
                ours = True
            except ConfigError as exc:
                ours = exc.reason == "out of range"  # well-formed; the range is ours to check (_RANGES)
            assert ours == vllm_accepts(parse, value), (key, value)


def test_the_values_the_resolver_reasons_about_are_typed_once():
    engine = build_engine_args(
        {
            "tensor_parallel_degree": "max",
            "enable_expert_parallel": "True",
            "max_rolling_batch_size": "64",
            "quantize": "fp8",
            "dtype": "bf16",
            "enforce_eager": "false",
        },
        {},
        CAPS,
        H200X8,
    )
    assert (engine.tensor_parallel_size, engine.expert_parallel, engine.max_num_seqs) == (8, True, 64)
    assert (engine.quantization, engine.dtype, engine.enforce_eager) == ("fp8", "bfloat16", False)
    unset = build_engine_args({}, {}, CAPS, H200X8)
    assert (unset.tensor_parallel_size, unset.expert_parallel, unset.max_num_seqs, unset.enforce_eager) == (
        1,
        False,
        None,
        None,
    )


@pytest.mark.parametrize("value", ["TRITON_ATTN", "triton_attn", "FlashInfer", "auto"])
def test_the_attention_backend_takes_vllms_member_names_in_any_case_and_auto(value: str) -> None:
    args = args_for({"attention_backend": value})
    assert args[args.index("--attention-backend") + 1] == value  # vLLM's own validator upper-cases it


def test_a_misspelled_attention_backend_is_refused_before_anything_loads() -> None:
    # vLLM would raise "Unknown attention backend" inside the engine, minutes into the start
    with pytest.raises(ConfigError) as caught:
        args_for({"attention_backend": "TRITON_ATTNN"})
    message = str(caught.value)
    assert message.startswith("option.attention_backend='TRITON_ATTNN': not a vLLM attention_backend of this version")
    assert "(did you mean TRITON_ATTN?)" in message and "Accepted: auto, FLASH_ATTN, " in message


def test_the_snapshots_read_the_attention_backends_from_vllms_enum() -> None:
    for version in ("0.26.0", "0.32.0"):
        spec = load_snapshot(version).engine_args["attention_backend"]
        assert spec.kind == "enum" and {"FLASH_ATTN", "TRITON_ATTN", "FLASHINFER"} <= set(spec.choices)
