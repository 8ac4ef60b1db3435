"""Model data as an uncompressed S3 prefix (ModelDataSource.S3DataSource, CompressionType None).

SageMaker mounts the files under the prefix as they are at /opt/ml/model; a serving.properties
beside the weights configures the container there. This module measures the prefix (for the
timeouts), fetches the small config files so the resolver can plan locally, and puts a
serving.properties beside the weights. Listing and downloading are the container's own
(entrypoint.model.s3); only what is particular to deploying lives here: the rules for
--model-data, the data source SageMaker is given, and the upload.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from entrypoint.model.s3 import S3Error, S3Location, S3Object, download_objects, list_s3_objects
from entrypoint.utils.errors import ConfigError
from sagemaker_deploy.aws import DeployError, aws_errors

MODEL_DATA_FLAG = "--model-data"
MODEL_DATA_FORMAT = "s3://BUCKET/PREFIX/"
# What the resolver reads from a checkpoint (entrypoint model description); weights stay in S3.
PLAN_FILES = ("config.json", "hf_quant_config.json", "generation_config.json", "serving.properties")


def parse_model_data(uri: str) -> S3Location:
    """--model-data: a bucket and a key prefix of uncompressed checkpoint files."""
    if not uri.startswith("s3://") or len(uri) <= len("s3://"):
        raise ConfigError(MODEL_DATA_FLAG, uri, "must be an S3 prefix", MODEL_DATA_FORMAT)
    where = S3Location.parse(uri, MODEL_DATA_FLAG)
    if not where.prefix:
        raise ConfigError(MODEL_DATA_FLAG, uri, "needs a bucket and a key prefix", MODEL_DATA_FORMAT)
    if where.prefix.endswith((".tar.gz", ".tgz")):
        raise ConfigError(
            MODEL_DATA_FLAG, uri, "archives are not used: upload the checkpoint files uncompressed", MODEL_DATA_FORMAT
        )
    return where


def prefix_uri(where: S3Location) -> str:
    """The prefix as SageMaker wants it for S3Prefix data: ending in "/"."""
    return where.uri + "/"


def data_source(where: S3Location) -> dict[str, Any]:
    return {"S3DataSource": {"S3Uri": prefix_uri(where), "S3DataType": "S3Prefix", "CompressionType": "None"}}


@contextmanager
def _as_deploy_error(action: str) -> Iterator[None]:
    """An S3 request AWS refused is an AWS-side failure for this tool (exit 1, as the CLI documents)."""
    try:
        yield
    except S3Error as exc:
        raise DeployError(f"{action}: {exc.reason}") from exc


def list_objects(s3: Any, where: S3Location) -> list[S3Object]:
    """Every object under the prefix; refused when config.json is not directly under it."""
    with _as_deploy_error(f"list {prefix_uri(where)}"):
        objects = list_s3_objects(s3, where, key=MODEL_DATA_FLAG)
    if "config.json" not in {obj.relative for obj in objects}:
        raise ConfigError(
            MODEL_DATA_FLAG,
            prefix_uri(where),
            "no config.json directly under this prefix",
            "the checkpoint's directory",
        )
    return objects


def fetch_plan_files(s3: Any, where: S3Location, objects: list[S3Object], dest: Path) -> list[str]:
    """Download the config files the resolver reads into `dest`; returns their names."""
    wanted = [obj for obj in objects if obj.relative in PLAN_FILES]
    with _as_deploy_error(f"download from {prefix_uri(where)}"):
        download_objects(s3, where, wanted, dest, progress=False, key=MODEL_DATA_FLAG)
    return [obj.relative for obj in wanted]


def upload_properties(s3: Any, where: S3Location, path: Path) -> str:
    key = where.key("serving.properties")
    with aws_errors(f"upload s3://{where.bucket}/{key}"):
        s3.upload_file(str(path), where.bucket, key)
    return f"s3://{where.bucket}/{key}"
