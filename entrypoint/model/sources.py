"""Where the model lives: a local directory, an `s3://bucket/prefix`, or a Hugging Face hub id.

Two jobs, kept apart because they run at different times:

* `read_model_configs` — planning: fetch only `config.json` (and the optional `hf_quant_config.json`),
  so a bad configuration is refused before gigabytes move.
* `download_model` — `serve`: bring the whole checkpoint to local disk, resuming rather than
  re-downloading (S3: per-file size + ETag check, `.part` files renamed into place; hub:
  `snapshot_download`, which resumes itself).

Errors are `ConfigError`s that name the model, the file and what would work. Credentials (AWS keys,
`HF_TOKEN`) are passed to the client libraries and never formatted into a message or a log line:
S3 errors are reported by their error code only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Any

from entrypoint.errors import ConfigError
from entrypoint.model.describe import CONFIG_FILE, HF_QUANT_CONFIG_FILE

log = logging.getLogger(__name__)

MODEL_KEY = "option.model_id"
ACCEPTED_MODELS = (
    "a local directory containing config.json (default /opt/ml/model)",
    "s3://bucket/prefix",
    "a Hugging Face hub id such as org/name",
)
# Hub ids are `name` or `org/name`; anything with more slashes is a path.
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
MAX_CONFIG_BYTES = 16 << 20  # config files are kilobytes; refuse to buffer a mislabelled shard
# Records the ETag each downloaded object had, so a resume need not re-hash gigabytes.
S3_MANIFEST = ".moe-serving-s3.json"
PART_SUFFIX = ".part"


class ModelLocation(StrEnum):
    LOCAL = "local"
    S3 = "s3"
    HUB = "hub"


def classify_model(model: str) -> ModelLocation:
    """Which kind of location `model` names. Raises ConfigError for something that is none of them."""
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(MODEL_KEY, model, "empty model location", ACCEPTED_MODELS)
    if model.startswith("s3://"):
        return ModelLocation.S3
    if "://" in model:
        raise ConfigError(MODEL_KEY, model, "unsupported URL scheme", ACCEPTED_MODELS)
    if Path(model).expanduser().exists() or model.startswith(("/", "./", "../", "~")) or model in (".", ".."):
        return ModelLocation.LOCAL
    if HUB_ID.match(model):
        return ModelLocation.HUB
    # Relative paths with several components, backslashes, spaces...: a directory that is not there.
    return ModelLocation.LOCAL


def read_model_configs(
    model: str, *, revision: str | None = None, environ: Mapping[str, str] | None = None
) -> tuple[dict[str, Any], dict[str, Any] | None, str]:
    """(config.json, hf_quant_config.json or None, normalised source) for a model location."""
    env = os.environ if environ is None else environ
    kind = classify_model(model)
    if kind == ModelLocation.S3:
        return _read_s3_configs(model, env)
    if kind == ModelLocation.HUB:
        return _read_hub_configs(model, revision, env)
    return _read_local_configs(model)


def download_model(
    model: str, dest: Path | None, *, revision: str | None = None, environ: Mapping[str, str] | None = None
) -> Path:
    """Make the whole checkpoint available on local disk and return its directory.

    Local paths are returned as they are. `s3://` prefixes are synchronised into `dest` (required).
    Hub ids go to `dest` when given, else to the Hugging Face cache.
    """
    env = os.environ if environ is None else environ
    kind = classify_model(model)
    if kind == ModelLocation.LOCAL:
        path = Path(model).expanduser()
        if not path.is_dir():
            raise ConfigError(MODEL_KEY, model, "directory does not exist", ACCEPTED_MODELS)
        return path
    if kind == ModelLocation.S3:
        if dest is None:
            raise ValueError("an s3:// model needs a destination directory")
        location = S3Location.parse(model)
        sync_s3_prefix(s3_client(env), location, Path(dest))
        return Path(dest)
    return _hub_snapshot(model, dest, revision, env)


def _parse_json(raw: bytes, where: str, model: str) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        detail = (
            f"{exc.msg} at line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        )
        raise ConfigError(MODEL_KEY, model, f"{where} is not valid JSON ({detail})") from None
    if not isinstance(data, dict):
        raise ConfigError(MODEL_KEY, model, f"{where} must hold a JSON object, not {type(data).__name__}")
    return data


# ----------------------------------------------------------------------------------------------- local


def _read_local_configs(model: str) -> tuple[dict[str, Any], dict[str, Any] | None, str]:
    directory = Path(model).expanduser()
    if not directory.exists():
        raise ConfigError(MODEL_KEY, model, "directory does not exist", ACCEPTED_MODELS)
    if not directory.is_dir():
        raise ConfigError(MODEL_KEY, model, "is a file; expected the checkpoint's directory", ACCEPTED_MODELS)
    config = _read_local_json(directory / CONFIG_FILE, model, required=True)
    assert config is not None
    return config, _read_local_json(directory / HF_QUANT_CONFIG_FILE, model, required=False), os.path.abspath(directory)


def _read_local_json(path: Path, model: str, *, required: bool) -> dict[str, Any] | None:
    if not path.is_file():
        if required:
            raise ConfigError(MODEL_KEY, model, f"no {path.name} in {path.parent}", ACCEPTED_MODELS)
        return None
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(MODEL_KEY, model, f"cannot read {path}: {exc.strerror}") from None
    return _parse_json(raw, str(path), model)


# ------------------------------------------------------------------------------------------------ S3


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str  # without leading or trailing "/"; "" for the whole bucket

    @classmethod
    def parse(cls, uri: str) -> S3Location:
        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        if not bucket:
            raise ConfigError(MODEL_KEY, uri, "no bucket in the S3 URI", "s3://bucket/prefix")
        return cls(bucket, prefix.strip("/"))

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def key(self, relative: str) -> str:
        return f"{self.prefix}/{relative}" if self.prefix else relative


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


def _s3_error(exc: Exception, target: str) -> ConfigError:
    """A ConfigError for a failed S3 call. Built from the error code only: never echoes credentials."""
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

    if isinstance(exc, NoCredentialsError):
        reason = "no AWS credentials found (set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or a role)"
    elif isinstance(exc, EndpointConnectionError):
        reason = "cannot reach the S3 endpoint (check AWS_ENDPOINT_URL / network)"
    elif isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", "unknown"))
        reason = _S3_REASONS.get(code, f"S3 error {code}")
    else:
        reason = f"S3 request failed ({type(exc).__name__})"
    return ConfigError(MODEL_KEY, target, reason)


def _s3_code(exc: Exception) -> str | None:
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code")) if isinstance(response, dict) else None


def _read_s3_configs(model: str, env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any] | None, str]:
    location = S3Location.parse(model)
    client = s3_client(env)
    config = _s3_get_json(client, location, CONFIG_FILE, required=True)
    assert config is not None
    return config, _s3_get_json(client, location, HF_QUANT_CONFIG_FILE, required=False), location.uri


def _s3_get_json(client: Any, location: S3Location, name: str, *, required: bool) -> dict[str, Any] | None:
    from botocore.exceptions import BotoCoreError, ClientError

    uri = f"s3://{location.bucket}/{location.key(name)}"
    try:
        response = client.get_object(Bucket=location.bucket, Key=location.key(name))
        if response.get("ContentLength", 0) > MAX_CONFIG_BYTES:
            raise ConfigError(MODEL_KEY, uri, f"{name} is larger than {MAX_CONFIG_BYTES >> 20} MiB")
        raw = response["Body"].read()
    except ClientError as exc:
        code = _s3_code(exc)
        # Without s3:ListBucket, S3 answers 403 rather than 404 for a missing object: for the optional
        # file both mean "not there"; the required one has already proven the read permission.
        if not required and code in ("NoSuchKey", "404", "AccessDenied", "403"):
            return None
        if code in ("NoSuchKey", "404"):
            raise ConfigError(MODEL_KEY, location.uri, f"no {name} under this prefix", ACCEPTED_MODELS) from None
        raise _s3_error(exc, uri) from None
    except BotoCoreError as exc:
        raise _s3_error(exc, uri) from None
    return _parse_json(raw, uri, location.uri)


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


def list_s3_objects(client: Any, location: S3Location) -> list[S3Object]:
    from botocore.exceptions import BotoCoreError, ClientError

    prefix = f"{location.prefix}/" if location.prefix else ""
    objects: list[S3Object] = []
    try:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=location.bucket, Prefix=prefix):
            for item in page.get("Contents", ()):
                key = item["Key"]
                if key.endswith("/"):  # "folder" placeholder objects made by the console
                    continue
                relative = key[len(prefix) :]
                parts = PurePosixPath(relative).parts
                if not relative or relative.startswith("/") or ".." in parts:
                    raise ConfigError(MODEL_KEY, f"s3://{location.bucket}/{key}", "object key escapes the prefix")
                objects.append(S3Object(key, relative, int(item["Size"]), str(item.get("ETag", "")).strip('"')))
    except (ClientError, BotoCoreError) as exc:
        raise _s3_error(exc, location.uri) from None
    if not objects:
        raise ConfigError(MODEL_KEY, location.uri, "no objects under this prefix", ACCEPTED_MODELS)
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


def sync_s3_prefix(client: Any, location: S3Location, dest: Path, *, progress: bool = True) -> SyncStats:
    """Download every object under the prefix into `dest`, skipping files that are already current."""
    from boto3.s3.transfer import TransferConfig
    from botocore.exceptions import BotoCoreError, ClientError
    from tqdm import tqdm

    objects = list_s3_objects(client, location)
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
            try:
                client.download_file(location.bucket, obj.key, str(part), Callback=bar.update, Config=transfer)
            except (ClientError, BotoCoreError) as exc:
                raise _s3_error(exc, f"s3://{location.bucket}/{obj.key}") from None
            if part.stat().st_size != obj.size:
                raise ConfigError(MODEL_KEY, f"s3://{location.bucket}/{obj.key}", "download truncated; run again")
            os.replace(part, target)
            manifest[obj.relative] = obj.etag
            _save_manifest(dest, manifest)  # after every file, so an interrupted run resumes from here
            stats.downloaded += 1
            stats.bytes_downloaded += obj.size
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


# ----------------------------------------------------------------------------------------------- hub


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _hub_options(env: Mapping[str, str]) -> dict[str, Any]:
    """huggingface_hub keyword arguments taken from `environ` (the library reads os.environ only at import)."""
    cache = env.get("HF_HUB_CACHE") or (os.path.join(env["HF_HOME"], "hub") if env.get("HF_HOME") else None)
    return {
        "token": env.get("HF_TOKEN") or env.get("HUGGING_FACE_HUB_TOKEN") or None,
        "local_files_only": _truthy(env.get("HF_HUB_OFFLINE")),
        "cache_dir": cache,
        "endpoint": env.get("HF_ENDPOINT") or None,
    }


def _hub_error(exc: Exception, model: str, revision: str | None, what: str, offline: bool) -> ConfigError:
    from huggingface_hub import errors

    if isinstance(exc, errors.LocalEntryNotFoundError):
        where = "HF_HUB_OFFLINE is set" if offline else "the hub could not be reached"
        return ConfigError(
            MODEL_KEY, model, f"{what} is not in the local Hugging Face cache and {where}", ACCEPTED_MODELS
        )
    if isinstance(exc, errors.GatedRepoError):
        return ConfigError(MODEL_KEY, model, "gated hub repository: accept its licence and set HF_TOKEN")
    if isinstance(exc, errors.RepositoryNotFoundError):
        return ConfigError(MODEL_KEY, model, "hub repository not found (or private: set HF_TOKEN)", ACCEPTED_MODELS)
    if isinstance(exc, errors.RevisionNotFoundError):
        return ConfigError("option.revision", revision, f"revision not found in hub repository {model}")
    if isinstance(exc, errors.EntryNotFoundError):
        return ConfigError(MODEL_KEY, model, f"hub repository has no {what}")
    if isinstance(exc, errors.HfHubHTTPError):
        status = exc.response.status_code if getattr(exc, "response", None) is not None else "?"
        return ConfigError(MODEL_KEY, model, f"hub request for {what} failed (HTTP {status})")
    if isinstance(exc, errors.HFValidationError):
        return ConfigError(MODEL_KEY, model, "not a valid hub repository id", ACCEPTED_MODELS)
    return ConfigError(MODEL_KEY, model, f"fetching {what} from the hub failed ({type(exc).__name__})")


def _read_hub_configs(
    model: str, revision: str | None, env: Mapping[str, str]
) -> tuple[dict[str, Any], dict[str, Any] | None, str]:
    config = _hub_json(model, CONFIG_FILE, revision, env, required=True)
    assert config is not None
    source = f"{model}@{revision}" if revision else model
    return config, _hub_json(model, HF_QUANT_CONFIG_FILE, revision, env, required=False), source


def _hub_json(
    model: str, name: str, revision: str | None, env: Mapping[str, str], *, required: bool
) -> dict[str, Any] | None:
    from huggingface_hub import errors, hf_hub_download

    options = _hub_options(env)
    try:
        path = hf_hub_download(model, name, revision=revision, **options)
    except (errors.EntryNotFoundError, errors.LocalEntryNotFoundError) as exc:
        if not required:
            # Offline, an optional file that was never cached is indistinguishable from an absent one.
            return None
        raise _hub_error(exc, model, revision, name, options["local_files_only"]) from None
    except (OSError, ValueError) as exc:  # HfHubHTTPError is an OSError; HFValidationError a ValueError
        raise _hub_error(exc, model, revision, name, options["local_files_only"]) from None
    return _parse_json(Path(path).read_bytes(), f"{model}/{name}", model)


def _hub_snapshot(model: str, dest: Path | None, revision: str | None, env: Mapping[str, str]) -> Path:
    from huggingface_hub import snapshot_download

    options = _hub_options(env)
    try:
        path = snapshot_download(model, revision=revision, local_dir=dest, **options)
    except (OSError, ValueError) as exc:
        raise _hub_error(exc, model, revision, "the snapshot", options["local_files_only"]) from None
    return Path(path)
