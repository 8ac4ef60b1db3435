"""Settings the way LMI reads them: serving.properties, then OPTION_* env, then SageMaker/TGI aliases.

Precedence (highest first), per key: the CLI (`--model`), serving.properties, `OPTION_FOO` in the
environment, SageMaker/TGI alias variables. Exactly one properties file is read: an explicit
`--properties` path, else `serving.properties` in the model directory, else the image default.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import javaproperties
from pydantic import BaseModel, ConfigDict, Field

from entrypoint.errors import ConfigError
from entrypoint.lmi_options import (
    CUDA_GRAPHS_ENV,
    ENV_ALIASES,
    ENV_SERVER_ALIASES,
)

DEFAULT_MODEL_DIR = "/opt/ml/model"
# The image copies the repository's serving.properties here (Dockerfile); overridable for tests.
DEFAULT_PROPERTIES_ENV = "MOE_SERVING_DEFAULT_PROPERTIES"
DEFAULT_PROPERTIES_PATH = "/opt/moe-serving/serving.properties"
DEFAULT_PORT = 8080
OPTION_PREFIX = "option."
ENV_OPTION_PREFIX = "OPTION_"


class Settings(BaseModel):
    """Normalised user configuration. Keys are lower-case, `-` folded to `_`, prefix stripped."""

    model_config = ConfigDict(frozen=True)

    options: dict[str, str] = Field(default_factory=dict)  # option.* keys
    server: dict[str, str] = Field(default_factory=dict)  # keys without prefix (engine, job_queue_size)
    sources: dict[str, str] = Field(default_factory=dict)  # "option.key" → where it came from
    properties_path: str | None = None
    host: str = "0.0.0.0"
    port: int = DEFAULT_PORT

    @property
    def model(self) -> str:
        return self.options.get("model_id") or self.options.get("model") or DEFAULT_MODEL_DIR


def normalise_key(key: str) -> str:
    return key.strip().lower().replace("-", "_")


def read_properties(path: Path) -> dict[str, str]:
    """Java-properties syntax (escapes, continuation lines, `:` separators) via javaproperties."""
    try:
        with path.open(encoding="utf-8") as handle:
            return dict(javaproperties.load(handle))
    except FileNotFoundError as exc:
        raise ConfigError("--properties", str(path), "file not found") from exc
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError("--properties", str(path), f"cannot be read as Java properties ({exc})") from exc


def _split_properties(raw: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    options: dict[str, str] = {}
    server: dict[str, str] = {}
    for key, value in raw.items():
        if key.lower().startswith(OPTION_PREFIX):
            options[normalise_key(key[len(OPTION_PREFIX) :])] = value.strip()
        else:
            server[normalise_key(key)] = value.strip()
    return options, server


def _env_options(environ: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """OPTION_FOO_BAR=v → {"foo_bar": (v, "env:OPTION_FOO_BAR")}; empty values are ignored (LMI)."""
    found: dict[str, tuple[str, str]] = {}
    for name, value in environ.items():
        if name.startswith(ENV_OPTION_PREFIX) and value.strip():
            found[normalise_key(name[len(ENV_OPTION_PREFIX) :])] = (value.strip(), f"env:{name}")
    return found


def _alias_options(environ: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    found: dict[str, tuple[str, str]] = {}
    for env_name, key in ENV_ALIASES:
        value = environ.get(env_name, "").strip()
        if value and key not in found:
            found[key] = (value, f"env:{env_name}")
    graphs = environ.get(CUDA_GRAPHS_ENV, "").strip().lower()
    if graphs:
        if graphs not in ("true", "false"):
            raise ConfigError(CUDA_GRAPHS_ENV, graphs, "must be a boolean", ("true", "false"))
        found["enforce_eager"] = ("true" if graphs == "false" else "false", f"env:{CUDA_GRAPHS_ENV}")
    return found


def _model_dir_properties(model: str) -> Path | None:
    candidate = Path(model) / "serving.properties"
    return candidate if "://" not in model and candidate.is_file() else None


def choose_properties_file(explicit: Path | None, model: str, environ: Mapping[str, str]) -> tuple[Path | None, str]:
    """Which single serving.properties to read, and why (one reason line)."""
    if explicit is not None:
        return explicit, f"serving.properties: {explicit} (--properties)"
    in_model = _model_dir_properties(model)
    if in_model is not None:
        return in_model, f"serving.properties: {in_model} (model directory)"
    default = Path(environ.get(DEFAULT_PROPERTIES_ENV, DEFAULT_PROPERTIES_PATH))
    if default.is_file():
        return default, f"serving.properties: {default} (image default)"
    return None, "serving.properties: none found; environment and defaults only"


def _port(environ: Mapping[str, str], override: int | None) -> int:
    if override is not None:
        return override
    raw = environ.get("SAGEMAKER_BIND_TO_PORT", "").strip()
    if not raw:
        return DEFAULT_PORT
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ConfigError("SAGEMAKER_BIND_TO_PORT", raw, "must be a TCP port number", "1-65535")
    return int(raw)


def load_settings(
    *,
    model: str | None = None,
    properties: Path | None = None,
    environ: Mapping[str, str] | None = None,
    host: str | None = None,
    port: int | None = None,
) -> tuple[Settings, list[str]]:
    """Merge every source into Settings; returns the settings and the reason lines it produced."""
    env = dict(os.environ if environ is None else environ)
    env_opts = _env_options(env)
    alias_opts = _alias_options(env)

    # The model location decides which serving.properties is read, so settle it from the
    # sources that do not depend on the file first; the file may then name another model.
    early_model = model or (env_opts.get("model_id") or alias_opts.get("model_id") or (None, ""))[0]
    path, why = choose_properties_file(properties, early_model or DEFAULT_MODEL_DIR, env)
    file_opts: dict[str, str] = {}
    file_server: dict[str, str] = {}
    if path is not None:
        file_opts, file_server = _split_properties(read_properties(path))

    options: dict[str, str] = {}
    sources: dict[str, str] = {}
    for layer in (alias_opts, env_opts):  # lowest precedence first
        for key, (value, origin) in layer.items():
            options[key] = value
            sources[key] = origin
    for key, value in file_opts.items():
        options[key] = value
        sources[key] = f"file:{path}"
    if model:
        options["model_id"] = model
        sources["model_id"] = "cli:--model"

    server = {key: value for env_name, key in ENV_SERVER_ALIASES if (value := env.get(env_name, "").strip())}
    server.update(file_server)
    settings = Settings(
        options=options,
        server=server,
        sources=sources,
        properties_path=str(path) if path else None,
        host=host or "0.0.0.0",
        port=_port(env, port),
    )
    return settings, [why]
