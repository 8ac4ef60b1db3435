"""Model sources against real parts: local directories, a real moto S3 server over HTTP, and a
Hugging Face cache laid out on disk with HF_HUB_OFFLINE=1. Nothing here touches the network."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from boto3.s3.transfer import TransferConfig

from entrypoint.model.s3 import PART_SUFFIX, S3_MANIFEST, S3Location, s3_client, sync_s3_prefix
from entrypoint.model.sources import ModelLocation, classify_model, download_model, read_model_configs
from entrypoint.utils.errors import ConfigError
from tests.conftest_paths import FIXTURE_MODELS

FIXTURES = FIXTURE_MODELS
NEMOTRON = FIXTURES / "nvidia-nemotron-3-nano-30b-a3b-fp8"
QWEN = FIXTURES / "qwen3-30b-a3b-fp8"
SECRET = "s3cr3t-never-printed-0123456789abcdef"


# ------------------------------------------------------------------------------------------- local


def test_local_directory_returns_both_config_files_and_its_absolute_path() -> None:
    config, hf_quant, source = read_model_configs(str(NEMOTRON), environ={})
    assert config == json.loads((NEMOTRON / "config.json").read_text())
    assert hf_quant == json.loads((NEMOTRON / "hf_quant_config.json").read_text())
    assert source == str(NEMOTRON.resolve())


def test_local_directory_without_hf_quant_config_gives_none() -> None:
    assert read_model_configs(str(QWEN), environ={})[1] is None


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        path.write_text(content)
    else:
        path.write_bytes(content)
    return path


LOCAL_ERRORS: list[tuple[str, str, list[str]]] = [
    ("a missing directory is refused", "missing", ["directory does not exist", "s3://bucket/prefix"]),
    ("a directory without config.json is refused", "empty", ["no config.json in"]),
    ("a file instead of a directory is refused", "file", ["is a file"]),
    ("unparseable config.json names the file and the position", "badjson", ["badjson/config.json", "line 2 column"]),
    ("config.json holding a list is refused", "list", ["must hold a JSON object, not list"]),
    ("unparseable hf_quant_config.json names that file", "badquant", ["badquant/hf_quant_config.json"]),
]


@pytest.mark.parametrize(("case", "fragments"), [c[1:] for c in LOCAL_ERRORS], ids=[c[0] for c in LOCAL_ERRORS])
def test_local_directory_error(tmp_path: Path, case: str, fragments: list[str]) -> None:
    (tmp_path / "empty").mkdir()
    write(tmp_path / "file", "x")
    write(tmp_path / "badjson" / "config.json", '{"model_type": "qwen3_moe",\n  oops}')
    write(tmp_path / "list" / "config.json", "[1, 2]")
    write(tmp_path / "badquant" / "config.json", "{}")
    write(tmp_path / "badquant" / "hf_quant_config.json", "{")
    with pytest.raises(ConfigError) as info:
        read_model_configs(str(tmp_path / case), environ={})
    assert info.value.key == "option.model_id"
    for fragment in fragments:
        assert fragment in str(info.value)


CLASSIFY: list[tuple[str, str, ModelLocation]] = [
    ("the SageMaker model directory is local", "/opt/ml/model", ModelLocation.LOCAL),
    ("a relative ./path is local", "./model", ModelLocation.LOCAL),
    ("a path with several components is local", "models/qwen/fp8", ModelLocation.LOCAL),
    ("an s3 URI is S3", "s3://bucket/prefix", ModelLocation.S3),
    ("org/name is a hub id", "Qwen/Qwen3-30B-A3B-FP8", ModelLocation.HUB),
    ("a bare name is a hub id", "gpt2", ModelLocation.HUB),
]


@pytest.mark.parametrize(("model", "kind"), [c[1:] for c in CLASSIFY], ids=[c[0] for c in CLASSIFY])
def test_classify_model(model: str, kind: ModelLocation) -> None:
    assert classify_model(model) == kind


@pytest.mark.parametrize("model", ["", "gs://bucket/model", "https://example.com/model"])
def test_unsupported_model_location_is_refused(model: str) -> None:
    with pytest.raises(ConfigError, match="option.model_id"):
        classify_model(model)


@pytest.mark.parametrize(
    ("model", "shown"),
    [
        ("https://alice:s3cr3tpw@models.internal/qwen", "'https://alice:***@models.internal/qwen': unsupported URL"),
        ("s3://AKIAEXAMPLE:s3cr3tpw@bucket/qwen", "'s3://AKIAEXAMPLE:***@bucket/qwen': an S3 URI carries no"),
    ],
    ids=["an https URL's password", "an S3 URI's user:password"],
)
def test_a_refused_model_url_shows_its_user_but_not_its_password(model: str, shown: str) -> None:
    with pytest.raises(ConfigError) as info:
        classify_model(model)
    assert "s3cr3tpw" not in str(info.value) and "s3cr3tpw" not in repr(info.value.value)
    assert shown in str(info.value)  # the user and host still say which URL was meant


def test_download_of_a_local_directory_returns_it_unchanged(tmp_path: Path) -> None:
    assert download_model(str(QWEN), tmp_path / "unused", environ={}) == QWEN
    assert not (tmp_path / "unused").exists()


# ---------------------------------------------------------------------------------------------- S3


@pytest.fixture
def aws_env(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    # Keep any real AWS configuration of this machine out of the picture.
    for name in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    return {
        "AWS_ACCESS_KEY_ID": "AKIATESTING000000000",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": moto_endpoint,
    }


@pytest.fixture
def bucket(aws_env: dict[str, str]) -> str:
    name = f"models-{uuid.uuid4().hex[:12]}"
    s3_client(aws_env).create_bucket(Bucket=name)
    return name


def upload_dir(env: dict[str, str], bucket: str, prefix: str, source: Path) -> None:
    client = s3_client(env)
    for path in sorted(source.rglob("*")):
        if path.is_file():
            client.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(source).as_posix()}")


def make_checkpoint(root: Path) -> Path:
    """A small checkpoint-shaped folder: configs, two 'shards' of random bytes, a nested file."""
    write(root / "config.json", (QWEN / "config.json").read_text())
    write(root / "model-00001-of-00002.safetensors", os.urandom(300_000))
    write(root / "model-00002-of-00002.safetensors", os.urandom(200_000))
    write(root / "tokenizer" / "tokenizer.json", '{"version": "1.0"}')
    return root


def test_s3_prefix_configs_are_read_over_http(aws_env: dict[str, str], bucket: str) -> None:
    upload_dir(aws_env, bucket, "nemotron/fp8", NEMOTRON)
    config, hf_quant, source = read_model_configs(f"s3://{bucket}/nemotron/fp8/", environ=aws_env)
    assert config["model_type"] == "nemotron_h"
    assert hf_quant is not None and hf_quant["quantization"]["quant_algo"] == "FP8"
    assert source == f"s3://{bucket}/nemotron/fp8"


def test_s3_prefix_without_hf_quant_config_gives_none(aws_env: dict[str, str], bucket: str) -> None:
    upload_dir(aws_env, bucket, "qwen", QWEN)
    assert read_model_configs(f"s3://{bucket}/qwen", environ=aws_env)[1] is None


S3_ERRORS: list[tuple[str, str, list[str]]] = [
    ("a prefix without config.json is refused", "s3://{bucket}/nothing-here", ["no config.json under this prefix"]),
    ("a missing bucket is refused", "s3://no-such-bucket-{bucket}/m", ["the bucket does not exist"]),
    ("a URI without a bucket is refused", "s3:///model", ["no bucket in the S3 URI"]),
]


@pytest.mark.parametrize(("uri", "fragments"), [c[1:] for c in S3_ERRORS], ids=[c[0] for c in S3_ERRORS])
def test_s3_config_error(aws_env: dict[str, str], bucket: str, uri: str, fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        read_model_configs(uri.format(bucket=bucket), environ=aws_env)
    for fragment in fragments:
        assert fragment in str(info.value)
    assert SECRET not in str(info.value)


def test_s3_access_denied_and_rejected_keys_are_clear_and_echo_no_secret(
    aws_env: dict[str, str], bucket: str, moto_endpoint: str
) -> None:
    upload_dir(aws_env, bucket, "qwen", QWEN)
    iam = boto3.client(
        "iam",
        endpoint_url=moto_endpoint,
        region_name="us-east-1",
        aws_access_key_id="AKIATESTING000000000",
        aws_secret_access_key=SECRET,
    )
    iam.create_user(UserName="no-permissions")
    key = iam.create_access_key(UserName="no-permissions")["AccessKey"]
    unprivileged = {**aws_env, "AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}
    httpx.post(f"{moto_endpoint}/moto-api/reset-auth", content=b"0").raise_for_status()
    try:
        with pytest.raises(ConfigError) as denied:
            read_model_configs(f"s3://{bucket}/qwen", environ=unprivileged)
        with pytest.raises(ConfigError) as rejected:
            read_model_configs(f"s3://{bucket}/qwen", environ=aws_env)
    finally:
        httpx.post(f"{moto_endpoint}/moto-api/reset-auth", content=b"inf").raise_for_status()
    assert "access denied" in str(denied.value)
    assert "credentials were rejected" in str(rejected.value)
    for message in (str(denied.value), str(rejected.value)):
        assert key["SecretAccessKey"] not in message and SECRET not in message


class GetCounter:
    """Counts GetObject calls made through one boto3 client (the bytes actually fetched)."""

    def __init__(self, client: Any):
        self.count = 0
        client.meta.events.register("before-call.s3.GetObject", self._count)

    def _count(self, **_: Any) -> None:
        self.count += 1


def test_s3_download_fetches_everything_then_resumes_without_a_single_get(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    source = make_checkpoint(tmp_path / "src")
    upload_dir(aws_env, bucket, "ckpt", source)
    dest = tmp_path / "dest"

    assert download_model(f"s3://{bucket}/ckpt", dest, environ=aws_env) == dest
    files = [path for path in source.rglob("*") if path.is_file()]
    assert len(files) == 4  # config, two shards, the nested tokenizer file
    for path in files:
        assert (dest / path.relative_to(source)).read_bytes() == path.read_bytes()
    assert not list(dest.rglob(f"*{PART_SUFFIX}"))
    mtimes = {p: p.stat().st_mtime_ns for p in dest.rglob("*") if p.name != S3_MANIFEST}

    client = s3_client(aws_env)
    gets = GetCounter(client)
    stats = sync_s3_prefix(client, S3Location(bucket, "ckpt"), dest, progress=False)
    assert (gets.count, stats.downloaded, stats.skipped) == (0, 0, 4)
    assert {p: p.stat().st_mtime_ns for p in dest.rglob("*") if p.name != S3_MANIFEST} == mtimes


def test_s3_download_shows_a_byte_progress_bar(
    aws_env: dict[str, str], bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    upload_dir(aws_env, bucket, "ckpt", make_checkpoint(tmp_path / "src"))
    download_model(f"s3://{bucket}/ckpt", tmp_path / "dest", environ=aws_env)
    err = capsys.readouterr().err
    assert f"s3://{bucket}/ckpt" in err and "B/s" in err


def test_s3_resume_refetches_only_missing_changed_or_corrupt_files(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    source = make_checkpoint(tmp_path / "src")
    upload_dir(aws_env, bucket, "ckpt", source)
    dest = tmp_path / "dest"
    location = S3Location(bucket, "ckpt")
    sync_s3_prefix(s3_client(aws_env), location, dest, progress=False)

    # An interrupted earlier run: one shard gone, its half-written .part left behind.
    shard1 = dest / "model-00001-of-00002.safetensors"
    shard1.unlink()
    write(shard1.with_name(shard1.name + PART_SUFFIX), b"half")
    # The object changed on S3 (new ETag), same size.
    changed = os.urandom(200_000)
    s3_client(aws_env).put_object(Bucket=bucket, Key="ckpt/model-00002-of-00002.safetensors", Body=changed)
    # A local file corrupted with the right size and no manifest record: caught by its md5.
    manifest = json.loads((dest / S3_MANIFEST).read_text())
    del manifest["tokenizer/tokenizer.json"]
    (dest / S3_MANIFEST).write_text(json.dumps(manifest))
    write(dest / "tokenizer" / "tokenizer.json", '{"version": "9.9"}')

    client = s3_client(aws_env)
    gets = GetCounter(client)
    stats = sync_s3_prefix(client, location, dest, progress=False)
    assert (stats.downloaded, stats.skipped) == (3, 1)
    assert gets.count >= 3
    assert shard1.read_bytes() == (source / shard1.name).read_bytes()
    assert (dest / "model-00002-of-00002.safetensors").read_bytes() == changed
    assert (dest / "tokenizer" / "tokenizer.json").read_text() == '{"version": "1.0"}'
    assert not list(dest.rglob(f"*{PART_SUFFIX}"))


def test_s3_multipart_object_without_manifest_is_trusted_by_size(
    aws_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    big = os.urandom(6 << 20)
    write(tmp_path / "big.bin", big)
    s3_client(aws_env).upload_file(
        str(tmp_path / "big.bin"),
        bucket,
        "ckpt/big.bin",
        Config=TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20),
    )
    head = s3_client(aws_env).head_object(Bucket=bucket, Key="ckpt/big.bin")
    assert "-" in head["ETag"]  # really multipart
    dest = tmp_path / "dest"
    sync_s3_prefix(s3_client(aws_env), S3Location(bucket, "ckpt"), dest, progress=False)
    assert (dest / "big.bin").read_bytes() == big
    (dest / S3_MANIFEST).unlink()
    stats = sync_s3_prefix(s3_client(aws_env), S3Location(bucket, "ckpt"), dest, progress=False)
    assert (stats.downloaded, stats.skipped) == (0, 1)


def test_s3_download_of_an_empty_prefix_is_refused(aws_env: dict[str, str], bucket: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no objects under this prefix"):
        download_model(f"s3://{bucket}/missing", tmp_path / "dest", environ=aws_env)


# --------------------------------------------------------------------------------------------- hub

REPO = "acme/tiny-moe"
MAIN = "a" * 40
V1 = "b" * 40


@pytest.fixture
def hf_cache(tmp_path: Path) -> Path:
    """The on-disk layout huggingface_hub resolves from: refs/<name> -> snapshots/<commit>/<file>."""
    repo = tmp_path / "hub" / "models--acme--tiny-moe"
    write(repo / "refs" / "main", MAIN)
    write(repo / "refs" / "v1", V1)
    write(repo / "snapshots" / MAIN / "config.json", (NEMOTRON / "config.json").read_text())
    write(repo / "snapshots" / MAIN / "hf_quant_config.json", (NEMOTRON / "hf_quant_config.json").read_text())
    write(repo / "snapshots" / V1 / "config.json", (QWEN / "config.json").read_text())
    return tmp_path / "hub"


def offline(cache: Path, **extra: str) -> dict[str, str]:
    return {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), **extra}


def test_hub_configs_resolve_from_the_local_cache_offline(hf_cache: Path) -> None:
    config, hf_quant, source = read_model_configs(REPO, environ=offline(hf_cache))
    assert config["model_type"] == "nemotron_h"
    assert hf_quant is not None and hf_quant["producer"]["name"] == "modelopt"
    assert source == REPO


def test_hub_revision_selects_that_snapshot(hf_cache: Path) -> None:
    config, hf_quant, source = read_model_configs(REPO, revision="v1", environ=offline(hf_cache))
    assert (config["model_type"], hf_quant, source) == ("qwen3_moe", None, f"{REPO}@v1")


def test_hub_id_missing_from_the_offline_cache_is_a_clear_error_without_the_token(hf_cache: Path) -> None:
    token = "hf_" + "x" * 34
    with pytest.raises(ConfigError) as info:
        read_model_configs("acme/not-cached", environ=offline(hf_cache, HF_TOKEN=token))
    message = str(info.value)
    assert info.value.key == "option.model_id"
    assert "'acme/not-cached'" in message
    assert "config.json is not in the local Hugging Face cache and HF_HUB_OFFLINE is set" in message
    assert token not in message


def test_hub_download_offline_returns_the_cached_snapshot(hf_cache: Path) -> None:
    path = download_model(REPO, None, environ=offline(hf_cache))
    assert path == hf_cache / "models--acme--tiny-moe" / "snapshots" / MAIN
    assert (path / "config.json").is_file()
