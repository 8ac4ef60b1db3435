"""sagemaker_deploy's pure parts: instance table, env mapping and limits, sizing, validation, stream parsing."""

from __future__ import annotations

import json
import time

import pytest

from entrypoint.utils.errors import ConfigError
from sagemaker_deploy.environment import check_env_limits, env_name, properties_to_env
from sagemaker_deploy.instances import INSTANCE_GPUS, accelerators_for
from sagemaker_deploy.requests import Deployment, resource_name, utc_stamp
from sagemaker_deploy.sizing import MAX_TIMEOUT_S, MIN_TIMEOUT_S, ModelSize, size_of_local_model, timeouts_for
from sagemaker_deploy.streaming import Final, StreamError, StreamParser, Token
from sagemaker_deploy.validation import RequestInvalid, enum_values, validate_request
from tests.conftest_paths import FIXTURE_MODELS

BOTOCORE_TYPES = set(enum_values("sagemaker", "ProductionVariantInstanceType"))


def test_botocore_knows_277_instance_types_including_the_h200_ones():
    assert len(BOTOCORE_TYPES) >= 277
    assert {"ml.p5e.48xlarge", "ml.p5en.48xlarge", "ml.p6-b200.48xlarge"} <= BOTOCORE_TYPES


@pytest.mark.parametrize("instance_type", sorted(INSTANCE_GPUS))
def test_every_planned_instance_type_is_a_real_sagemaker_type(instance_type):
    assert instance_type in BOTOCORE_TYPES


@pytest.mark.parametrize(
    ("instance_type", "gpu", "count"),
    [
        ("ml.p5e.48xlarge", "H200", 8),
        ("ml.p5en.48xlarge", "H200", 8),
        ("ml.p5.48xlarge", "H100", 8),
        ("ml.p4d.24xlarge", "A100", 8),
        ("ml.p6-b200.48xlarge", "B200", 8),
        ("ml.g6e.xlarge", "L40S", 1),
        ("ml.g6e.12xlarge", "L40S", 4),
        ("ml.g6e.48xlarge", "L40S", 8),
        ("ml.g5.2xlarge", "A10G", 1),
        ("ml.g6.24xlarge", "L4", 4),
    ],
)
def test_instance_type_maps_to_its_gpus(instance_type, gpu, count):
    assert tuple(accelerators_for(instance_type)) == (gpu, count)


def test_unknown_instance_type_error_lists_the_known_ones():
    with pytest.raises(ConfigError) as err:
        accelerators_for("ml.p9.96xlarge")
    assert err.value.key == "--instance-type"
    assert "ml.p9.96xlarge" in str(err.value) and "ml.p5e.48xlarge" in str(err.value)


@pytest.mark.parametrize(
    ("key", "env"),
    [
        ("option.max_model_len", "OPTION_MAX_MODEL_LEN"),
        ("option.moe_backend", "OPTION_MOE_BACKEND"),
        ("option.tensor-parallel-degree", "OPTION_TENSOR_PARALLEL_DEGREE"),
        ("engine", "ENGINE"),
        ("job_queue_size", "JOB_QUEUE_SIZE"),
    ],
)
def test_property_key_becomes_the_env_name_the_container_reads_back(key, env):
    assert env_name(key) == env


def test_properties_to_env_keeps_values_and_refuses_two_keys_with_one_env_name():
    assert properties_to_env({"option.dtype": " bf16 ", "engine": "Python"}) == {
        "OPTION_DTYPE": "bf16",
        "ENGINE": "Python",
    }
    with pytest.raises(ConfigError, match="OPTION_MAX_MODEL_LEN"):
        properties_to_env({"option.max_model_len": "1", "option.max-model-len": "2"})
    # the same value as written to the env (whitespace trimmed) is no conflict
    assert properties_to_env({"option.max_model_len": " 4096", "option.max-model-len": "4096 "}) == {
        "OPTION_MAX_MODEL_LEN": "4096"
    }


def test_env_limits_come_from_botocore_and_name_the_offending_key():
    check_env_limits({f"K{i}": "v" for i in range(100)})
    with pytest.raises(ConfigError, match="at most 100"):
        check_env_limits({f"K{i}": "v" for i in range(101)})
    with pytest.raises(ConfigError) as err:
        check_env_limits({"OPTION_SPECULATIVE_CONFIG": "x" * 1025})
    assert err.value.key == "OPTION_SPECULATIVE_CONFIG" and "1024" in str(err.value)


@pytest.mark.parametrize(
    ("size_bytes", "download", "startup"),
    [
        (None, MAX_TIMEOUT_S, MAX_TIMEOUT_S),  # unknown size: the maximum, never a default that kills
        (1_000_000, MIN_TIMEOUT_S, MIN_TIMEOUT_S),  # tiny model: the 600 s floor on both
        (30_500_000_000, MIN_TIMEOUT_S, 752),  # Qwen3-30B-A3B FP8: 300 + 203 → floor; 600 + 152.5
        (200_000_000_000, 1633, 1600),  # Llama-4-Scout bf16: 300 + 1333; 600 + 1000
        (672_000_000_000, MAX_TIMEOUT_S, MAX_TIMEOUT_S),  # DeepSeek-V3: clamped to SageMaker's 3600
    ],
)
def test_timeouts_follow_the_documented_formula(size_bytes, download, startup):
    t = timeouts_for(ModelSize(size_bytes, "test"))
    assert (t.download_s, t.startup_s) == (download, startup)


def test_local_model_size_prefers_weight_files_over_the_config_estimate(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text((FIXTURE_MODELS / "qwen3-30b-a3b-fp8" / "config.json").read_text())
    estimate = size_of_local_model(model)
    assert estimate.source == "config.json estimate"
    assert 28e9 < estimate.bytes < 33e9  # 30.5 B parameters, FP8
    (model / "model-00001.safetensors").write_bytes(b"\0" * 4096)
    assert size_of_local_model(model) == ModelSize(4096, "local weights")


@pytest.mark.parametrize(
    ("fixture", "low_gb", "high_gb"),
    [
        ("deepseek-v3", 640, 720),  # 671 B parameters, block FP8
        ("mixtral-8x7b-instruct-v0.1-fp8", 44, 50),  # 46.7 B, FP8
        ("mixtral-8x7b-instruct-v0.1-awq", 20, 27),  # 4-bit AWQ
        ("qwen3-30b-a3b", 58, 64),  # bf16
    ],
)
def test_config_estimate_is_within_ten_percent_of_known_sizes(fixture, low_gb, high_gb):
    size = size_of_local_model(FIXTURE_MODELS / fixture)
    assert low_gb * 1e9 < size.bytes < high_gb * 1e9


def test_names_of_two_deployments_in_one_second_differ():
    assert utc_stamp(1_790_000_000.001) != utc_stamp(1_790_000_000.999)
    assert utc_stamp(1_790_000_000.25).endswith("250") and len(resource_name("e" * 80)) == 63


def test_resource_names_fit_sagemaker_and_validate():
    name = resource_name("x" * 80, "20261129-203000")
    assert len(name) == 63 and name.endswith("-20261129-203000")
    validate_request("sagemaker", "CreateEndpoint", {"EndpointName": "e", "EndpointConfigName": name})


def test_one_deployment_names_its_model_and_config_once_even_across_a_second_boundary(monkeypatch):
    # CI caught CreateEndpoint naming a config one second newer than the one just created.
    clock = iter(1_790_000_000.9 + 0.2 * i for i in range(100))  # crosses a second on the second read
    monkeypatch.setattr(time, "time", lambda: next(clock))
    d = _deployment(resource="")
    names = {
        d.create_model()["ModelName"],
        d.create_endpoint_config()["EndpointConfigName"],
        d.create_endpoint_config()["ProductionVariants"][0]["ModelName"],
        d.create_endpoint()["EndpointConfigName"],
        d.update_endpoint()["EndpointConfigName"],
    }
    assert len(names) == 1 and names.pop().startswith("moe-20")


def _deployment(**overrides):
    base = dict(
        endpoint="moe",
        instance_type="ml.p5e.48xlarge",
        image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/moe-serving:1",
        role_arn="arn:aws:iam::123456789012:role/sm",
        environment={"OPTION_MOE_BACKEND": "auto"},
        timeouts=timeouts_for(ModelSize(30_500_000_000, "t")),
        resource="moe-20261129-203000",
    )
    return Deployment(**{**base, **overrides})


def test_valid_deployment_requests_pass_botocore_validation():
    _deployment().validate()
    _deployment().validate(update=True)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"instance_type": "ml.p9.48xlarge"}, "is not one of the 277 values"),
        ({"role_arn": "not-an-arn"}, "ExecutionRoleArn"),
        ({"endpoint": "bad_name!"}, "EndpointName='bad_name!' does not match"),
        ({"environment": {"1BAD": "v"}}, "key '1BAD'"),
        ({"environment": {"OPTION_X": "v" * 1025}}, "more than the maximum 1024"),
    ],
)
def test_invalid_requests_are_refused_before_sending(overrides, message):
    with pytest.raises(RequestInvalid, match=message.replace("(", r"\(")) as err:
        _deployment(**overrides).validate()
    assert "is invalid" in str(err.value)


def test_stream_parser_yields_tokens_across_split_chunks_and_utf8():
    lines = [
        {"index": 0, "token": {"id": 1, "text": " Mix", "log_prob": -0.1}, "generated_text": None},
        {"index": 0, "token": {"id": 2, "text": "türe", "log_prob": -0.2}, "generated_text": None},
        {"index": 0, "token": {"id": 3, "text": "!", "log_prob": -0.3}, "generated_text": " Mixtüre!"},
    ]
    raw = b"".join(json.dumps(line, ensure_ascii=False).encode() + b"\n" for line in lines)
    parser = StreamParser()
    events = []
    for cut in range(0, len(raw), 7):  # 7-byte parts split the JSON and the 2-byte "ü"
        events += parser.feed(raw[cut : cut + 7])
    events += parser.close()
    assert events == [Token(" Mix"), Token("türe"), Token("!"), Final(" Mixtüre!", None)]


def test_stream_parser_reports_a_mid_stream_error_line_and_openai_chunks():
    parser = StreamParser()
    events = list(parser.feed(b'data: {"choices": [{"delta": {"content": "hi"}}]}\n{"code": 424, "error": "x"}\n'))
    assert events == [Token("hi"), StreamError(424, "x")]
    assert list(parser.feed(b"data: [DONE]\n")) == []
    assert list(StreamParser().close()) == []
