"""`python -m sagemaker_deploy` end to end against moto in server mode (real HTTP, real boto3).

The CLI runs as a subprocess with fake credentials and AWS_ENDPOINT_URL pointing at the local
server (tests/moto_sagemaker.py says what the server adds to moto). What moto cannot show: real
instance provisioning, the container's health check, real timeouts; the status is InService at once.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import boto3
import httpx
import pytest

from sagemaker_deploy.instances import INSTANCE_GPUS
from sagemaker_deploy.sizing import ModelSize, timeouts_for
from tests.conftest_paths import FIXTURE_MODELS, REPO
from tests.moto_sagemaker import FAKE_CREDENTIALS, UPDATES, queue_stream

ROLE = "arn:aws:iam::123456789012:role/SageMakerExecution"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/moe-serving:0.1.0"
STATIC_FP8 = FIXTURE_MODELS / "qwen3-30b-a3b-fp8-static-synthetic"
SECRET = FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"]


@pytest.fixture
def aws_env(moto_endpoint: str, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "OPTION_"))}
    env.update(FAKE_CREDENTIALS)
    env.update(
        AWS_ENDPOINT_URL=moto_endpoint,
        AWS_CONFIG_FILE=str(tmp_path / "no-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-credentials"),
        AWS_EC2_METADATA_DISABLED="true",
    )
    return env


def boto(env: dict[str, str], service: str):  # -> a boto3 client
    return boto3.client(
        service,
        endpoint_url=env["AWS_ENDPOINT_URL"],
        region_name=env["AWS_REGION"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )


def cli(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "sagemaker_deploy", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert SECRET not in result.stdout + result.stderr, "a credential was printed"
    return result


def upload_model(env: dict[str, str], weights: dict[str, int], model: Path = STATIC_FP8) -> str:
    """A checkpoint prefix in moto S3: the fixture's config files + weight files of the given sizes."""
    s3 = boto(env, "s3")
    bucket = f"models-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    for path in model.iterdir():
        s3.put_object(Bucket=bucket, Key=f"qwen3/{path.name}", Body=path.read_bytes())
    for name, size in weights.items():
        s3.put_object(Bucket=bucket, Key=f"qwen3/{name}", Body=b"\0" * size)
    return f"s3://{bucket}/qwen3/"


def queue_invoke_answer(env: dict[str, str], body: dict) -> None:
    """moto's runtime mock answers from a queue filled through its own API."""
    results = {"results": [{"Body": json.dumps(body), "ContentType": "application/json"}]}
    httpx.post(f"{env['AWS_ENDPOINT_URL']}/moto-api/static/sagemaker/endpoint-results", json=results).raise_for_status()


def resources(env: dict[str, str], prefix: str) -> tuple[list[str], list[str], list[str]]:
    sm = boto(env, "sagemaker")
    models = [m["ModelName"] for m in sm.list_models()["Models"] if m["ModelName"].startswith(prefix)]
    configs = [
        c["EndpointConfigName"]
        for c in sm.list_endpoint_configs()["EndpointConfigs"]
        if c["EndpointConfigName"].startswith(prefix)
    ]
    endpoints = [e["EndpointName"] for e in sm.list_endpoints()["Endpoints"] if e["EndpointName"].startswith(prefix)]
    return models, configs, endpoints


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def deploy_args(name: str, *extra: str) -> list[str]:
    return ["deploy", "--endpoint-name", name, "--instance-type", "ml.p5e.48xlarge", "--image-uri", IMAGE,
            "--role", ROLE, *extra]  # fmt: skip


# ------------------------------------------------------------------------------------------- plan


@pytest.mark.parametrize("instance_type", sorted(INSTANCE_GPUS))
def test_plan_json_for_every_instance_type(instance_type, capsys):
    from sagemaker_deploy.cli import main

    assert main(["plan", "--instance-type", instance_type, "--model", str(STATIC_FP8), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    _gpu, count = INSTANCE_GPUS[instance_type]
    assert data["instance_type"] == instance_type
    assert data["gpu"]["count"] == count
    assert data["vllm_version"] == "0.32.0"  # the image's vLLM, not this machine's CPU build
    # The image default serving.properties: tensor_parallel_degree=max, passed on one GPU too (the single-GPU
    # types used to compare "1" with "1" without looking at the plan).
    tp = data["vllm_args"][data["vllm_args"].index("--tensor-parallel-size") + 1]
    assert tp == str(count)


def test_plan_on_p5e_picks_triton_for_static_fp8_and_keys_match_entrypoint_resolve(aws_env):
    plan = cli(aws_env, "plan", "--instance-type", "ml.p5e.48xlarge", "--model", str(STATIC_FP8), "--json")
    assert plan.returncode == 0, plan.stderr
    data = json.loads(plan.stdout)
    assert data["moe_backend"] == "triton" and data["gpu"]["name"] == "NVIDIA H200"
    resolve = subprocess.run(
        [sys.executable, "-m", "entrypoint", "resolve", "--model", str(STATIC_FP8), "--gpu", "H200",
         "--num-gpus", "8", "--vllm-version", "0.32.0", "--properties", str(REPO / "serving.properties"), "--json"],
        cwd=REPO, env=aws_env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert resolve.returncode == 0, resolve.stderr
    assert set(data) - set(json.loads(resolve.stdout)) == {"instance_type"}


def test_plan_refuses_an_unknown_instance_type_listing_known_ones(aws_env):
    result = cli(aws_env, "plan", "--instance-type", "ml.p9.96xlarge", "--model", str(STATIC_FP8))
    assert result.returncode == 2
    assert "--instance-type='ml.p9.96xlarge'" in result.stderr and "ml.p5e.48xlarge" in result.stderr


# ----------------------------------------------------------------------------------------- deploy


def test_deploy_with_s3_model_data_creates_everything_sized_from_the_prefix(aws_env, tmp_path):
    weights = {"model-00001-of-00002.safetensors": 3_000_000, "model-00002-of-00002.safetensors": 2_000_000}
    data = upload_model(aws_env, weights)
    props = write(tmp_path / "serving.properties", "option.moe_backend=auto\noption.max_model_len=8192\n")
    queue_invoke_answer(aws_env, {"generated_text": " experts route tokens"})
    result = cli(aws_env, *deploy_args("qwen-s3", "--model-data", data, "--properties", str(props)))
    assert result.returncode == 0, result.stderr
    assert "smoke request answered: ' experts route tokens'" in result.stderr
    # resolved from the config.json fetched from S3: the Triton rule's row of the plan table
    assert re.search(r"^moe backend +triton \(source: rule:fp8-tensor-static-hopper-triton;", result.stderr, re.M)

    models, configs, endpoints = resources(aws_env, "qwen-s3")
    assert endpoints == ["qwen-s3"] and len(models) == len(configs) == 1
    sm = boto(aws_env, "sagemaker")
    container = sm.describe_model(ModelName=models[0])["PrimaryContainer"]
    assert container["Image"] == IMAGE
    assert container["ModelDataSource"]["S3DataSource"] == {
        "S3Uri": data, "S3DataType": "S3Prefix", "CompressionType": "None"
    }  # fmt: skip
    assert container.get("Environment", {}) == {}  # the configuration travels as serving.properties
    bucket, prefix = data[5:].split("/", 1)
    uploaded = boto(aws_env, "s3").get_object(Bucket=bucket, Key=prefix + "serving.properties")["Body"].read()
    assert uploaded == props.read_bytes()

    variant = sm.describe_endpoint_config(EndpointConfigName=configs[0])["ProductionVariants"][0]
    total = sum(weights.values()) + sum(p.stat().st_size for p in STATIC_FP8.iterdir()) + len(props.read_bytes())
    expected = timeouts_for(ModelSize(total - len(props.read_bytes()), "s3 prefix"))
    assert variant["InstanceType"] == "ml.p5e.48xlarge"
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == expected.startup_s
    assert variant["ModelDataDownloadTimeoutInSeconds"] == expected.download_s


def test_deploy_with_properties_as_env_maps_keys_and_stays_within_limits(aws_env, tmp_path):
    data = upload_model(aws_env, {"model.safetensors": 1000})
    props = write(
        tmp_path / "p.properties",
        f"engine=Python\noption.model_id={data}\noption.moe_backend=flashinfer_cutlass\n"
        "option.tensor_parallel_degree=max\noption.max_rolling_batch_size=32\n",
    )
    result = cli(aws_env, *deploy_args("qwen-env", "--properties", str(props), "--no-wait"))
    assert result.returncode == 0, result.stderr
    models, configs, _ = resources(aws_env, "qwen-env")
    env = boto(aws_env, "sagemaker").describe_model(ModelName=models[0])["PrimaryContainer"]["Environment"]
    assert env == {
        "ENGINE": "Python",
        "OPTION_MODEL_ID": data,
        "OPTION_MOE_BACKEND": "flashinfer_cutlass",
        "OPTION_TENSOR_PARALLEL_DEGREE": "max",
        "OPTION_MAX_ROLLING_BATCH_SIZE": "32",
    }
    assert "ModelDataSource" not in boto(aws_env, "sagemaker").describe_model(ModelName=models[0])["PrimaryContainer"]
    assert len(env) <= 100 and all(len(k) <= 1024 and len(v) <= 1024 for k, v in env.items())
    assert re.search(r"^moe backend +flashinfer_cutlass \(source: option\.moe_backend;", result.stderr, re.M)
    # No model data: the container downloads the weights itself, inside the startup window.
    variant = boto(aws_env, "sagemaker").describe_endpoint_config(EndpointConfigName=configs[0])["ProductionVariants"][
        0
    ]
    assert variant["ModelDataDownloadTimeoutInSeconds"] == 600
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 600 + 600


@pytest.mark.parametrize(
    ("case", "properties", "args", "message"),
    [
        ("unknown backend", "option.moe_backend=warp_drive\n", [], "option.moe_backend"),
        ("too many GPUs", "option.tensor_parallel_degree=16\n", [], "tensor_parallel"),
        ("empty role", "", ["--role", ""], "--role=''"),
        ("model and model data", "option.model_id=org/model\n", [], "option.model_id='org/model': conflicts"),
    ],
)
def test_a_refused_configuration_creates_nothing(aws_env, tmp_path, case, properties, args, message):
    data = upload_model(aws_env, {"model.safetensors": 10})
    props = write(tmp_path / "serving.properties", properties)
    name = "refused-" + case.replace(" ", "-")
    result = cli(aws_env, *deploy_args(name, "--model-data", data, "--properties", str(props)), *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert resources(aws_env, name) == ([], [], [])
    bucket, prefix = data[5:].split("/", 1)
    keys = [o["Key"] for o in boto(aws_env, "s3").list_objects_v2(Bucket=bucket)["Contents"]]
    assert prefix + "serving.properties" not in keys  # nothing uploaded either


def test_deploy_refuses_an_existing_endpoint_and_a_local_model_path(aws_env):
    data = upload_model(aws_env, {"model.safetensors": 10})
    assert cli(aws_env, *deploy_args("twice", "--model-data", data, "--no-wait")).returncode == 0
    again = cli(aws_env, *deploy_args("twice", "--model-data", data, "--no-wait"))
    assert again.returncode == 1 and "already exists: use `update`" in again.stderr
    assert len(resources(aws_env, "twice")[0]) == 1
    local = cli(aws_env, *deploy_args("local", "--model", str(STATIC_FP8), "--no-wait"))
    assert local.returncode == 2 and "SageMaker cannot see" in local.stderr


def test_missing_credentials_and_region_are_named(aws_env):
    no_creds = {k: v for k, v in aws_env.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                                              "AWS_SESSION_TOKEN")}  # fmt: skip
    result = cli(no_creds, "delete", "--endpoint-name", "whatever")
    assert result.returncode == 1
    assert "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in result.stderr
    assert "Traceback" not in result.stderr
    no_region = {k: v for k, v in aws_env.items() if k not in ("AWS_REGION", "AWS_DEFAULT_REGION")}
    result = cli(no_region, "delete", "--endpoint-name", "whatever")
    assert result.returncode == 1 and "no AWS region: pass --region or set AWS_REGION" in result.stderr


def test_requests_botocore_would_send_but_sagemaker_refuses_stop_before_anything_is_created(aws_env):
    # botocore's own validation lets an invalid endpoint name through (it checks no patterns) and
    # moto accepts it too; real SageMaker refuses it after the model already exists.
    data = upload_model(aws_env, {"model.safetensors": 10})
    result = cli(aws_env, *deploy_args("qwen_3!", "--model-data", data))
    assert result.returncode == 2, result.stderr
    assert "EndpointName='qwen_3!' does not match the pattern" in result.stderr
    assert resources(aws_env, "qwen_3") == ([], [], [])


# ------------------------------------------------------------------------------ update and delete


def test_update_is_blue_green_and_cleans_up_the_old_model_and_config(aws_env, tmp_path):
    data = upload_model(aws_env, {"model.safetensors": 10})
    assert cli(aws_env, *deploy_args("upd", "--model-data", data, "--no-smoke")).returncode == 0
    (old_model,), (old_config,), _ = resources(aws_env, "upd")
    props = write(tmp_path / "serving.properties", "option.moe_backend=flashinfer_cutlass\n")
    args = deploy_args("upd", "--model-data", data, "--properties", str(props))
    args[0] = "update"
    result = cli(aws_env, *[a for a in args if a != "--no-smoke"])
    assert result.returncode == 0, result.stderr
    models, configs, endpoints = resources(aws_env, "upd")
    assert endpoints == ["upd"] and old_model not in models and old_config not in configs
    current = boto(aws_env, "sagemaker").describe_endpoint(EndpointName="upd")["EndpointConfigName"]
    assert configs == [current]
    sent = [u for u in UPDATES if u["EndpointName"] == "upd"][-1]
    policy = sent["DeploymentConfig"]["BlueGreenUpdatePolicy"]
    assert policy["TrafficRoutingConfiguration"]["Type"] == "ALL_AT_ONCE"
    missing = cli(aws_env, *[("nope" if a == "upd" else a) for a in args])
    assert missing.returncode == 1 and "does not exist: use `deploy`" in missing.stderr


def test_delete_removes_endpoint_config_and_model_and_is_idempotent(aws_env):
    data = upload_model(aws_env, {"model.safetensors": 10})
    assert cli(aws_env, *deploy_args("gone", "--model-data", data, "--no-wait")).returncode == 0
    first = cli(aws_env, "delete", "--endpoint-name", "gone", "--wait")
    assert first.returncode == 0, first.stderr
    assert resources(aws_env, "gone") == ([], [], [])
    second = cli(aws_env, "delete", "--endpoint-name", "gone")
    assert second.returncode == 0 and "not found, nothing to delete" in second.stderr


# ----------------------------------------------------------------------------------------- invoke


def test_invoke_prints_the_answer(aws_env):
    data = upload_model(aws_env, {"model.safetensors": 10})
    assert cli(aws_env, *deploy_args("inv", "--model-data", data, "--no-wait")).returncode == 0
    queue_invoke_answer(aws_env, {"generated_text": "forty-two"})
    result = cli(aws_env, "invoke", "--endpoint-name", "inv", "--prompt", "q", "--max-new-tokens", "4")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"generated_text": "forty-two"}


def test_invoke_stream_prints_tokens_from_a_real_event_stream(aws_env):
    lines = [{"token": {"id": i, "text": t}, "generated_text": None} for i, t in enumerate([" Mix", "ture", " of"])]
    lines.append({"token": {"id": 3, "text": " experts"}, "generated_text": " Mixture of experts"})
    raw = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    queue_stream([raw[:10], raw[10:47], raw[47:]])  # parts split lines mid-JSON
    result = cli(aws_env, "invoke", "--endpoint-name", "inv", "--stream")
    assert result.returncode == 0, result.stderr
    assert result.stdout == " Mixture of experts\n"
    queue_stream([b'{"token": {"text": "a"}}\n{"code": 507, "error": "out of memory"}\n'])
    failed = cli(aws_env, "invoke", "--endpoint-name", "inv", "--stream")
    assert failed.returncode == 1 and "code 507" in failed.stderr and "out of memory" in failed.stderr
