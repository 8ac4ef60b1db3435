"""Model data as an uncompressed S3 prefix (ModelDataSource.S3DataSource, CompressionType None).

SageMaker mounts the files under the prefix as they are at /opt/ml/model; a serving.properties
beside the weights configures the container there. This module measures the prefix (for the
timeouts), fetches the small config files so the resolver can plan locally, and puts a
serving.properties beside the weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from entrypoint.errors import ConfigError
from sagemaker_deploy.aws import aws_errors

# What the resolver reads from a checkpoint (entrypoint model description); weights stay in S3.
PLAN_FILES = ("config.json", "hf_quant_config.json", "generation_config.json", "serving.properties")


@dataclass(frozen=True)
class S3Prefix:
    bucket: str
    prefix: str  # always ends with "/" (SageMaker requires it for S3Prefix data)

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    @classmethod
    def parse(cls, uri: str) -> S3Prefix:
        if not uri.startswith("s3://") or len(uri) <= len("s3://"):
            raise ConfigError("--model-data", uri, "must be an S3 prefix", "s3://BUCKET/PREFIX/")
        bucket, _, prefix = uri[len("s3://") :].partition("/")
        if not bucket or not prefix.strip("/"):
            raise ConfigError("--model-data", uri, "needs a bucket and a key prefix", "s3://BUCKET/PREFIX/")
        if prefix.endswith((".tar.gz", ".tgz")):
            raise ConfigError(
                "--model-data",
                uri,
                "archives are not used: upload the checkpoint files uncompressed",
                "s3://BUCKET/PREFIX/",
            )
        return cls(bucket, prefix.rstrip("/") + "/")

    def data_source(self) -> dict[str, Any]:
        return {"S3DataSource": {"S3Uri": self.uri, "S3DataType": "S3Prefix", "CompressionType": "None"}}


def list_objects(s3: Any, where: S3Prefix) -> dict[str, int]:
    """Key (relative to the prefix) → size in bytes for every object under the prefix."""
    objects: dict[str, int] = {}
    with aws_errors(f"list {where.uri}"):
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=where.bucket, Prefix=where.prefix):
            for item in page.get("Contents", []):
                objects[item["Key"][len(where.prefix) :]] = int(item["Size"])
    if not objects:
        raise ConfigError(
            "--model-data", where.uri, "no objects under this prefix", "a prefix holding config.json and weights"
        )
    if "config.json" not in objects:
        raise ConfigError(
            "--model-data", where.uri, "no config.json directly under this prefix", "the checkpoint's directory"
        )
    return objects


def fetch_plan_files(s3: Any, where: S3Prefix, objects: dict[str, int], dest: Path) -> list[str]:
    """Download the config files the resolver reads into `dest`; returns their names."""
    fetched = []
    for name in PLAN_FILES:
        if name in objects:
            with aws_errors(f"download {where.uri}{name}"):
                s3.download_file(where.bucket, where.prefix + name, str(dest / name))
            fetched.append(name)
    return fetched


def upload_properties(s3: Any, where: S3Prefix, path: Path) -> str:
    key = where.prefix + "serving.properties"
    with aws_errors(f"upload s3://{where.bucket}/{key}"):
        s3.upload_file(str(path), where.bucket, key)
    return f"s3://{where.bucket}/{key}"
