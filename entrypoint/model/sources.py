"""Where the model lives: a local directory, an `s3://bucket/prefix`, or a Hugging Face hub id.

Two jobs, kept apart because they run at different times:

* `read_model_configs` — planning: fetch only `config.json` (and the optional `hf_quant_config.json`),
  so a bad configuration is refused before gigabytes move.
* `download_model` — `serve`: bring the whole checkpoint to local disk, resuming rather than
  re-downloading (S3: entrypoint.model.s3, per-file size + ETag check, `.part` files renamed into
  place; hub: `snapshot_download`, which resumes itself).

Errors are `ConfigError`s that name the model, the file and what would work. Credentials (AWS keys,
`HF_TOKEN`) are passed to the client libraries and never formatted into a message or a log line:
S3 errors are reported by their error code only.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from entrypoint.model.config_json import CONFIG_FILE, HF_QUANT_CONFIG_FILE
from entrypoint.model.s3 import MODEL_KEY, S3Location, read_s3_object, s3_client, sync_s3_prefix
from entrypoint.utils.errors import ConfigError
from entrypoint.utils.redact import redact_url_userinfo

ACCEPTED_MODELS = (
    "a local directory containing config.json (default /opt/ml/model)",
    "s3://bucket/prefix",
    "a Hugging Face hub id such as org/name",
)
# Hub ids are `name` or `org/name`; anything with more slashes is a path.
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
S3_USERINFO = "an S3 URI carries no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"
MAX_CONFIG_BYTES = 16 << 20  # config files are kilobytes; refuse to buffer a mislabelled shard


class ModelLocation(StrEnum):
    LOCAL = "local"
    S3 = "s3"
    HUB = "hub"


def classify_model(model: str) -> ModelLocation:
    """Which kind of location `model` names. Raises ConfigError for something that is none of them."""
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(MODEL_KEY, model, "empty model location", ACCEPTED_MODELS)
    # The only models that reach an error message or log line with a `scheme://` are refused or let through here, so a
    # password in one (`https://user:pw@host/...`) is hidden here once, as the plan's log hides it (utils.redact).
    if model.startswith("s3://"):
        if "@" in model.removeprefix("s3://").partition("/")[0]:
            # S3 bucket names never hold @: this is `user:password@`, which S3 URIs do not carry (and would echo)
            raise ConfigError(MODEL_KEY, redact_url_userinfo(model), S3_USERINFO, ACCEPTED_MODELS)
        return ModelLocation.S3
    if "://" in model:
        raise ConfigError(MODEL_KEY, redact_url_userinfo(model), "unsupported URL scheme", ACCEPTED_MODELS)
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


def _read_s3_configs(model: str, env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any] | None, str]:
    location = S3Location.parse(model)
    client = s3_client(env)
    config = _s3_json(client, location, CONFIG_FILE, required=True)
    assert config is not None
    return config, _s3_json(client, location, HF_QUANT_CONFIG_FILE, required=False), location.uri


def _s3_json(client: Any, location: S3Location, name: str, *, required: bool) -> dict[str, Any] | None:
    raw = read_s3_object(client, location, name, max_bytes=MAX_CONFIG_BYTES, required=required)
    return None if raw is None else _parse_json(raw, location.object_uri(name), location.uri)


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


TOKEN_SETTINGS = "option.hf_token or HF_TOKEN"  # the option wins (entrypoint/inputs/gather.py hub_environ)


def _hub_error(exc: Exception, model: str, revision: str | None, what: str, offline: bool) -> ConfigError:
    from huggingface_hub import errors

    if isinstance(exc, errors.LocalEntryNotFoundError):
        where = "HF_HUB_OFFLINE is set" if offline else "the hub could not be reached"
        return ConfigError(
            MODEL_KEY, model, f"{what} is not in the local Hugging Face cache and {where}", ACCEPTED_MODELS
        )
    if isinstance(exc, errors.GatedRepoError):
        return ConfigError(MODEL_KEY, model, f"gated hub repository: accept its licence and set {TOKEN_SETTINGS}")
    if isinstance(exc, errors.RepositoryNotFoundError):
        return ConfigError(
            MODEL_KEY, model, f"hub repository not found (or private: set {TOKEN_SETTINGS})", ACCEPTED_MODELS
        )
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
