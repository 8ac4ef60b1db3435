"""S3 for model checkpoints: one module for the container (entrypoint) and the deploy tool (sagemaker_deploy).

- `S3Location`: an `s3://bucket/prefix` URI, parsed once;
- `s3_client`: a client configured from an environment mapping the way boto3 reads the process's;
- `list_s3_objects`: every object under the prefix (size, ETag), refusing keys that escape it;
- `read_s3_object`: one small object's bytes (the config files the resolver reads);
- `download_objects` / `sync_s3_prefix`: files to local disk, resuming rather than re-downloading
  (per-file size + ETag, recorded in a manifest; `.part` files renamed into place).

Failures are `S3Error`s (a `ConfigError`) naming the key the user set (`option.model_id` in the
container, `--model-data` for deploy), the URI and a reason built from the S3 error code only:
credentials never reach a message or a log line.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from entrypoint.utils.errors import ConfigError

log = logging.getLogger(__name__)

# The container's name for the model location; deploy passes its own flag instead.
MODEL_KEY = "option.model_id"
# Records the ETag each downloaded object had, so a resume need not re-hash gigabytes.
S3_MANIFEST = ".moe-serving-s3.json"
PART_SUFFIX = ".part"
CONFIG_FILE = "config.json"


class S3Error(ConfigError):
    """An S3 request that failed (missing bucket, access denied, rejected credentials, no network)."""


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str  # without leading or trailing "/"; "" for the whole bucket

    @classmethod
    def parse(cls, uri: str, key: str = MODEL_KEY) -> S3Location:
        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        if not uri.startswith("s3://") or not bucket:
            raise ConfigError(key, uri, "no bucket in the S3 URI", "s3://bucket/prefix")
        return cls(bucket, prefix.strip("/"))

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def key(self, relative: str) -> str:
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def object_uri(self, relative: str) -> str:
        return f"s3://{self.bucket}/{self.key(relative)}"


def s3_client(environ: Mapping[str, str]) -> Any:
    """An S3 client configured from `environ` the way boto3 reads the process environment.

    Keys, session token, region, profile and `AWS_ENDPOINT_URL[_S3]` come from `environ` when set
    there; anything absent falls through to boto3's own chain (shared files, instance role).
    """
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ProfileNotFound

    endpoint = environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL") or None
    keys: dict[str, str] = {}
    if environ.get("AWS_ACCESS_KEY_ID") and environ.get("AWS_SECRET_ACCESS_KEY"):
        keys = {
            "aws_access_key_id": environ["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": environ["AWS_SECRET_ACCESS_KEY"],
        }
        if environ.get("AWS_SESSION_TOKEN"):
            keys["aws_session_token"] = environ["AWS_SESSION_TOKEN"]
    try:
        session = boto3.session.Session(
            region_name=environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or None,
            profile_name=None if keys else (environ.get("AWS_PROFILE") or None),
            **keys,
        )
    except ProfileNotFound:
        raise ConfigError("AWS_PROFILE", environ.get("AWS_PROFILE"), "no such profile in the AWS config") from None
    # Custom endpoints (MinIO, moto, VPC endpoints by IP) rarely resolve virtual-hosted bucket names.
    config = Config(
        retries={"max_attempts": 5, "mode": "standard"},
        s3={"addressing_style": "path"} if endpoint else {},
    )
    return session.client("s3", endpoint_url=endpoint, config=config)


_S3_REASONS = {
    "NoSuchBucket": "the bucket does not exist",
    "AccessDenied": "access denied (the role needs s3:GetObject and s3:ListBucket on it)",
    "AllAccessDisabled": "access denied (all access to this object has been disabled)",
    "403": "access denied (the role needs s3:GetObject and s3:ListBucket on it)",
    "InvalidAccessKeyId": "the AWS credentials were rejected (unknown access key id)",
    "SignatureDoesNotMatch": "the AWS credentials were rejected (secret key does not match)",
    "ExpiredToken": "the AWS credentials were rejected (session token expired)",
    "InvalidToken": "the AWS credentials were rejected (invalid session token)",
    "NoSuchKey": "no such object",
    "404": "no such object",
}


def s3_error(exc: Exception, target: str, key: str = MODEL_KEY) -> S3Error:
    """An S3Error for a failed S3 call. Built from the error code only: never echoes credentials."""
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

    if isinstance(exc, NoCredentialsError):
        reason = "no AWS credentials found (set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or a role)"
    elif isinstance(exc, EndpointConnectionError):
        reason = "cannot reach the S3 endpoint (check AWS_ENDPOINT_URL / network)"
    elif isinstance(exc, ClientError):
        reason = _S3_REASONS.get(error_code(exc) or "unknown", f"S3 error {error_code(exc) or 'unknown'}")
    else:
        reason = f"S3 request failed ({type(exc).__name__})"
    return S3Error(key, target, reason)


def error_code(exc: Exception) -> str | None:
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code")) if isinstance(response, dict) else None


def read_s3_object(
    client: Any, location: S3Location, name: str, *, max_bytes: int, required: bool, key: str = MODEL_KEY
) -> bytes | None:
    """The bytes of `name` under the prefix, or None when an optional object is not there."""
    from botocore.exceptions import BotoCoreError, ClientError

    uri = location.object_uri(name)
    try:
        response = client.get_object(Bucket=location.bucket, Key=location.key(name))
        if response.get("ContentLength", 0) > max_bytes:
            raise ConfigError(key, uri, f"{name} is larger than {max_bytes >> 20} MiB")
        return response["Body"].read()
    except ClientError as exc:
        code = error_code(exc)
        # Without s3:ListBucket, S3 answers 403 rather than 404 for a missing object: for an optional
        # file both mean "not there"; a required one read first has already proven the read permission.
        if not required and code in ("NoSuchKey", "404", "AccessDenied", "403"):
            return None
        if code in ("NoSuchKey", "404"):
            raise ConfigError(
                key, location.uri, f"no {name} under this prefix", "s3://bucket/prefix holding it"
            ) from None
        raise s3_error(exc, uri, key) from None
    except BotoCoreError as exc:
        raise s3_error(exc, uri, key) from None


@dataclass(frozen=True)
class S3Object:
    key: str
    relative: str  # path below the prefix, "/"-separated
    size: int
    etag: str  # without quotes

    @property
    def multipart(self) -> bool:
        # Multipart ETags are md5-of-part-md5s plus "-N": not comparable to a local file's md5.
        return "-" in self.etag


@dataclass
class SyncStats:
    downloaded: int = 0
    skipped: int = 0
    bytes_downloaded: int = 0


def list_s3_objects(client: Any, location: S3Location, *, key: str = MODEL_KEY) -> list[S3Object]:
    """Every object under the prefix (console "folder" placeholders left out). Refuses an empty prefix."""
    from botocore.exceptions import BotoCoreError, ClientError

    prefix = f"{location.prefix}/" if location.prefix else ""
    objects: list[S3Object] = []
    try:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=location.bucket, Prefix=prefix):
            for item in page.get("Contents", ()):
                object_key = item["Key"]
                if object_key.endswith("/"):  # "folder" placeholder objects made by the console
                    continue
                relative = object_key[len(prefix) :]
                parts = PurePosixPath(relative).parts
                if not relative or relative.startswith("/") or ".." in parts:
                    raise ConfigError(key, f"s3://{location.bucket}/{object_key}", "object key escapes the prefix")
                objects.append(S3Object(object_key, relative, int(item["Size"]), str(item.get("ETag", "")).strip('"')))
    except (ClientError, BotoCoreError) as exc:
        raise s3_error(exc, location.uri, key) from None
    if not objects:
        raise ConfigError(key, location.uri, "no objects under this prefix", "a prefix holding the checkpoint's files")
    return objects


def _md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(8 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _is_current(path: Path, obj: S3Object, manifest: Mapping[str, str]) -> bool:
    """Whether the local file already holds this object's bytes."""
    try:
        if path.stat().st_size != obj.size:
            return False
    except FileNotFoundError:
        return False
    recorded = manifest.get(obj.relative)
    if recorded is not None:
        return recorded == obj.etag
    if obj.multipart:
        return True  # size is all that can be compared without knowing the part size
    return _md5(path) == obj.etag


def _load_manifest(dest: Path) -> dict[str, str]:
    try:
        data = json.loads((dest / S3_MANIFEST).read_text())
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _save_manifest(dest: Path, manifest: Mapping[str, str]) -> None:
    tmp = dest / (S3_MANIFEST + PART_SUFFIX)
    tmp.write_text(json.dumps(dict(sorted(manifest.items())), indent=1))
    os.replace(tmp, dest / S3_MANIFEST)


def download_objects(
    client: Any,
    location: S3Location,
    objects: Iterable[S3Object],
    dest: Path,
    *,
    progress: bool = True,
    key: str = MODEL_KEY,
) -> SyncStats:
    """Download `objects` (listed under `location`) into `dest`, skipping files that are already current."""
    from boto3.s3.transfer import TransferConfig
    from botocore.exceptions import BotoCoreError, ClientError
    from tqdm import tqdm

    objects = list(objects)
    dest.mkdir(parents=True, exist_ok=True)
    manifest = _load_manifest(dest)
    todo = [obj for obj in objects if not _is_current(dest / obj.relative, obj, manifest)]
    stats = SyncStats(skipped=len(objects) - len(todo))
    transfer = TransferConfig(max_concurrency=16, multipart_chunksize=64 << 20)
    total = sum(obj.size for obj in todo)
    with tqdm(
        total=total,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=location.uri,
        file=sys.stderr,
        disable=not progress or not todo,
    ) as bar:
        for obj in todo:
            target = dest / obj.relative
            target.parent.mkdir(parents=True, exist_ok=True)
            part = target.with_name(target.name + PART_SUFFIX)
            uri = f"s3://{location.bucket}/{obj.key}"
            try:
                client.download_file(location.bucket, obj.key, str(part), Callback=bar.update, Config=transfer)
            except (ClientError, BotoCoreError) as exc:
                raise s3_error(exc, uri, key) from None
            if part.stat().st_size != obj.size:
                raise S3Error(key, uri, "download truncated; run again")
            os.replace(part, target)
            manifest[obj.relative] = obj.etag
            _save_manifest(dest, manifest)  # after every file, so an interrupted run resumes from here
            stats.downloaded += 1
            stats.bytes_downloaded += obj.size
    return stats


def sync_s3_prefix(client: Any, location: S3Location, dest: Path, *, progress: bool = True) -> SyncStats:
    """Download every object under the prefix into `dest`, skipping files that are already current."""
    objects = list_s3_objects(client, location)
    stats = download_objects(client, location, objects, dest, progress=progress)
    if CONFIG_FILE not in {obj.relative for obj in objects}:
        log.warning("%s holds no %s at its top level; vLLM will not find the model there", location.uri, CONFIG_FILE)
    log.info(
        "%s -> %s: %d files downloaded (%d bytes), %d already up to date",
        location.uri,
        dest,
        stats.downloaded,
        stats.bytes_downloaded,
        stats.skipped,
    )
    return stats
