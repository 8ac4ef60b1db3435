"""Settings the way LMI reads them: serving.properties, then OPTION_* env, then SageMaker/TGI aliases.

Precedence (highest first), per key: the CLI (`--model`), the user's serving.properties (`--properties`
or the model directory's), `OPTION_FOO` in the environment, SageMaker/TGI alias variables, and last the
image default serving.properties. Exactly one properties file is read: an explicit `--properties` path,
else `serving.properties` in the model directory, else the image default. The image default is only a
fallback: a deployment that sets `OPTION_MOE_BACKEND` or `TENSOR_PARALLEL_DEGREE` must get what it set.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import javaproperties
from pydantic import BaseModel, ConfigDict, Field, model_validator

from entrypoint.config.lmi_options import (
    CUDA_GRAPHS_ENV,
    ENV_ALIASES,
    ENV_SERVER_ALIASES,
    OPTION_TWINS,
    PROJECT_OPTIONS,
)
from entrypoint.config.moe import MoeBackend, MoeKernel, parse_moe_backend, parse_moe_kernel
from entrypoint.config.node_role import NodeRole, parse_node_role
from entrypoint.config.response_format import parse_response_format
from entrypoint.config.warmup import Warmup, parse_warmup
from entrypoint.utils.errors import ConfigError
from entrypoint.utils.ports import PORT_RANGE, parse_port
from entrypoint.utils.redact import is_secret_label
from entrypoint.utils.response_format import ResponseFormat
from entrypoint.utils.text import find_lone_surrogate

DEFAULT_MODEL_DIR = "/opt/ml/model"
# The image copies the repository's serving.properties here (Dockerfile); overridable for tests.
DEFAULT_PROPERTIES_ENV = "MOE_SERVING_DEFAULT_PROPERTIES"
DEFAULT_PROPERTIES_PATH = "/opt/moe-serving/serving.properties"
DEFAULT_PORT = 8080
# Set by the cpu flavour of the image (Dockerfile): a model served when nothing is mounted at /opt/ml/model.
FALLBACK_MODEL_ENV = "MOE_SERVING_FALLBACK_MODEL"
OPTION_PREFIX = "option."
ENV_OPTION_PREFIX = "OPTION_"


class Settings(BaseModel):
    """Normalised user configuration. Keys are lower-case, `-` folded to `_`, prefix stripped.

    The options this container interprets itself (PROJECT_OPTIONS) are typed fields, parsed once by
    `from_options`; `options` holds the rest as written, for the engine arguments.
    """

    model_config = ConfigDict(frozen=True)

    options: dict[str, str] = Field(default_factory=dict)  # option.* keys except PROJECT_OPTIONS
    server: dict[str, str] = Field(default_factory=dict)  # keys without prefix (engine, job_queue_size)
    sources: dict[str, str] = Field(default_factory=dict)  # "option.key" → where it came from
    moe_backend: MoeBackend = MoeBackend.AUTO  # option.moe_backend
    moe_kernel: MoeKernel = MoeKernel.AUTO  # option.moe_kernel
    warmup: Warmup = Warmup.AUTO  # option.warmup
    node_role: NodeRole = NodeRole.AUTO  # option.node_role
    response_format: ResponseFormat = ResponseFormat()  # option.output_formatter, option.tgi_compat
    properties_path: str | None = None
    host: str = "0.0.0.0"
    port: int = DEFAULT_PORT

    @model_validator(mode="after")
    def _project_options_are_typed(self) -> Settings:
        # A raw moe_backend left in `options` would reach vLLM as an unvalidated --moe-backend.
        left = PROJECT_OPTIONS & self.options.keys()
        if left:
            raise ValueError(f"{sorted(left)} belong in their typed fields: build Settings with from_options")
        return self

    @classmethod
    def from_options(
        cls, options: Mapping[str, str], sources: Mapping[str, str] | None = None, **fields: Any
    ) -> Settings:
        """Settings from merged option.* values, the project options parsed (errors name where they were set)."""
        origins = dict(sources or {})
        label = cls(sources=origins).option_label  # names an option where the user set it
        return cls(
            options={key: value for key, value in options.items() if key not in PROJECT_OPTIONS},
            sources=origins,
            moe_backend=parse_moe_backend(options.get("moe_backend"), label("moe_backend")),
            moe_kernel=parse_moe_kernel(options.get("moe_kernel"), label("moe_kernel")),
            warmup=parse_warmup(options.get("warmup"), label("warmup")),
            node_role=parse_node_role(options.get("node_role"), label("node_role")),
            response_format=parse_response_format(
                options.get("output_formatter"),
                options.get("tgi_compat"),
                label("output_formatter"),
                label("tgi_compat"),
            ),
            **fields,
        )

    @property
    def model(self) -> str:
        return self.options.get("model_id") or self.options.get("model") or DEFAULT_MODEL_DIR

    def option_label(self, key: str) -> str:
        """option.KEY as an error names it: with where the user set it, so they find what to fix."""
        origin = self.sources.get(key, "")
        if origin.startswith("env:"):
            return f"{origin.removeprefix('env:')} (option.{key})"
        if origin.startswith("file:"):
            return f"option.{key} (in {origin.removeprefix('file:')})"
        return f"option.{key}"


def normalise_key(key: str) -> str:
    return key.strip().lower().replace("-", "_")


def _unencodable(text: str) -> str | None:
    """Why `text` cannot become an argv element or an environment value, or None when it can.

    `\\ud800` escapes decode to lone surrogates, which UTF-8 cannot encode (print and os.execvpe fail
    late, with a traceback); NUL cannot be in a C string (os.execvpe: "embedded null byte").
    """
    if "\x00" in text:
        return "contains a NUL character"
    if find_lone_surrogate(text):
        return "contains a lone UTF-16 surrogate (a \\uD800-\\uDFFF escape not part of a valid pair)"
    return None


def read_properties(path: Path) -> dict[str, str]:
    """Java-properties syntax (escapes, continuation lines, `:` separators) via javaproperties."""
    try:
        # utf-8-sig: an editor's byte-order mark would otherwise become part of the first key, which then reads as
        # an unknown key and is ignored while the line looks right
        with path.open(encoding="utf-8-sig") as handle:
            pairs = javaproperties.load(handle, object_pairs_hook=list)
    except FileNotFoundError as exc:
        raise ConfigError("--properties", str(path), "file not found") from exc
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError("--properties", str(path), f"cannot be read as Java properties ({exc})") from exc
    raw = _without_conflicts(pairs, path)
    for key, value in raw.items():
        for text in (key, value):
            why = _unencodable(text)
            if why is not None:
                # The message must print: repr() escapes the value, the key is escaped here.
                shown_key = key.encode("utf-8", "backslashreplace").decode("utf-8")
                raise ConfigError(
                    shown_key, value, f"{why} (in {path})", "text without NUL or unpaired surrogates",
                    hide_value=is_secret_label(shown_key),  # the value is what is wrong, and it is a token
                )  # fmt: skip
    return raw


def _without_conflicts(pairs: list[tuple[str, str]], path: Path) -> dict[str, str]:
    """The file's keys, refusing one key set twice to different values: the same key, or two spellings that name one
    option (`option.max_model_len` and `OPTION.MAX-MODEL-LEN`). Java properties would keep the last silently; which
    one the user meant is not ours to guess. A repeated identical value, or an empty one ("not set"), is fine."""
    seen: dict[str, tuple[str, str]] = {}  # normalised key → (key as written, value)
    raw: dict[str, str] = {}
    for key, value in pairs:
        canonical = normalise_key(key)
        if canonical in seen:
            first_key, first_value = seen[canonical]
            if value.strip() and first_value.strip() and value.strip() != first_value.strip():
                label = key if first_key == key else f"{first_key} / {key}"
                raise ConfigError(
                    label, f"{first_value} / {value}", f"set twice with different values (in {path})",
                    "one line per option", hide_value=is_secret_label(key),
                )  # fmt: skip
        if value.strip() or canonical not in seen:
            seen[canonical] = (key, value)
        raw[key] = value
    return raw


def _split_properties(raw: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """option.* keys, server keys, and the keys left out because their value is empty.

    An empty value means "not set", exactly as an empty OPTION_* variable does: `option.quantization=`
    must not become an empty argv element, and it leaves the key to the lower layers.
    """
    options: dict[str, str] = {}
    server: dict[str, str] = {}
    empty: list[str] = []
    for key, value in raw.items():
        if not value.strip():
            empty.append(key)
        elif key.lower().startswith(OPTION_PREFIX):
            options[normalise_key(key[len(OPTION_PREFIX) :])] = value.strip()
        else:
            server[normalise_key(key)] = value.strip()
    return options, server, empty


def _env_options(environ: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """OPTION_FOO_BAR=v → {"foo_bar": (v, "env:OPTION_FOO_BAR")}; empty values are ignored (LMI). Two spellings of
    one option (`OPTION_MAX_MODEL_LEN`, `OPTION_max_model_len`) with different values are refused: which one wins
    would depend on the environment's order, as in the properties file (_without_conflicts)."""
    found: dict[str, tuple[str, str]] = {}
    for name, value in environ.items():
        if not (name.startswith(ENV_OPTION_PREFIX) and value.strip()):
            continue
        key = normalise_key(name[len(ENV_OPTION_PREFIX) :])
        if key in found and found[key][0] != value.strip():
            first_value, first_origin = found[key]
            raise ConfigError(
                f"{first_origin.removeprefix('env:')} / {name}", f"{first_value} / {value.strip()}",
                "two spellings of one option set to different values", "one variable per option",
                hide_value=is_secret_label(key),
            )  # fmt: skip
        found[key] = (value.strip(), f"env:{name}")
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


def choose_properties_file(
    explicit: Path | None, model: str, environ: Mapping[str, str]
) -> tuple[Path | None, str, bool]:
    """Which single serving.properties to read, why (one reason line), and whether it is the image default."""
    if explicit is not None:
        return explicit, f"serving.properties: {explicit} (--properties)", False
    in_model = _model_dir_properties(model)
    if in_model is not None:
        return in_model, f"serving.properties: {in_model} (model directory)", False
    default = image_default_properties(environ)
    if default.is_file():
        return default, f"serving.properties: {default} (image default; OPTION_* and alias variables override it)", True
    return None, "serving.properties: none found; environment and defaults only", False


def image_default_properties(environ: Mapping[str, str]) -> Path:
    return Path(environ.get(DEFAULT_PROPERTIES_ENV, DEFAULT_PROPERTIES_PATH))


def fallback_model(environ: Mapping[str, str], model_dir: Path = Path(DEFAULT_MODEL_DIR)) -> tuple[str, str] | None:
    """The image's built-in model when `model_dir` is empty (no config.json, no serving.properties), and why.

    Only with MOE_SERVING_FALLBACK_MODEL set (the cpu flavour sets it; the cuda image does not, so a GPU host
    with nothing mounted gets a clear error instead of a toy model), and only where the user named no model.
    """
    fallback = environ.get(FALLBACK_MODEL_ENV, "").strip()
    if not fallback or (model_dir / "config.json").exists() or (model_dir / "serving.properties").exists():
        return None
    if not (Path(fallback) / "config.json").is_file():
        raise ConfigError(FALLBACK_MODEL_ENV, fallback, "holds no config.json", "a model directory")
    why = (
        f"model: {model_dir} holds no config.json: serving the image's built-in {fallback} ({FALLBACK_MODEL_ENV}); "
        "mount a model there or set option.model_id"
    )
    return fallback, why


# Variables read inside vLLM's server, where a bad value can only be logged: checked here too, where it can still stop
# the start with exit 2. LMI's request-size knob (entrypoint.lmi.middleware.MAX_PAYLOAD_ENV, the same name) and the
# longest /ping waits for the warm-up (entrypoint.lmi.warmup_gate.TIMEOUT_ENV).
MAX_PAYLOAD_ENV = "SAGEMAKER_MAX_PAYLOAD_IN_MB"
WARMUP_TIMEOUT_ENV = "MOE_WARMUP_TIMEOUT_S"
_SERVER_NUMBERS = {
    MAX_PAYLOAD_ENV: ("must be a positive number of megabytes", ("6", "25", "0.5")),
    WARMUP_TIMEOUT_ENV: ("must be a positive, finite number of seconds", ("300", "900")),
}


def _check_server_numbers(environ: Mapping[str, str]) -> None:
    for name, (why, examples) in _SERVER_NUMBERS.items():
        raw = environ.get(name, "").strip()
        if not raw:
            continue
        try:
            number = float(raw) if raw.isascii() else math.nan
        except ValueError:
            number = math.nan
        if not (math.isfinite(number) and number > 0):
            raise ConfigError(name, raw, why, examples)


def _port(environ: Mapping[str, str], override: int | None) -> int:
    if override is not None:
        return override
    raw = environ.get("SAGEMAKER_BIND_TO_PORT", "").strip()
    if not raw:
        return DEFAULT_PORT
    port = parse_port(raw)
    if port is None:
        raise ConfigError("SAGEMAKER_BIND_TO_PORT", raw, "must be a TCP port number", PORT_RANGE)
    return port


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
    _check_server_numbers(env)
    env_opts = _env_options(env)
    alias_opts = _alias_options(env)

    # The model location decides which serving.properties is read, so settle it from the
    # sources that do not depend on the file first; the file may then name another model.
    early_model = model or (env_opts.get("model_id") or alias_opts.get("model_id") or (None, ""))[0]
    fallback = None if early_model or properties is not None else fallback_model(env)
    fallback_layer = {}
    if fallback is not None:
        early_model = fallback[0]
        fallback_layer = {"model_id": (fallback[0], f"env:{FALLBACK_MODEL_ENV}")}
    path, why, is_image_default = choose_properties_file(properties, early_model or DEFAULT_MODEL_DIR, env)
    reasons = [fallback[1], why] if fallback is not None else [why]
    file_opts: dict[str, str] = {}
    file_server: dict[str, str] = {}
    if path is not None:
        file_opts, file_server, empty = _split_properties(read_properties(path))
        if empty:
            reasons.append(
                f"serving.properties: empty value, key left unset (like an empty OPTION_*): {', '.join(empty)}"
            )
    file_layer = {key: (value, f"file:{path}") for key, value in file_opts.items()}

    # Lowest precedence first; the image default sits under the environment, the user's file above it.
    layers = [alias_opts, env_opts]
    layers.insert(0 if is_image_default else len(layers), file_layer)
    layers.insert(0, fallback_layer)
    if model:
        layers.append({"model_id": (model, "cli:--model")})
    options: dict[str, str] = {}
    sources: dict[str, str] = {}
    overridden: list[str] = []
    for layer in layers:
        below = dict(sources)  # what the lower layers set: this layer overrides those, its own twins meet in the plan
        for key, (value, origin) in layer.items():
            # an LMI name and its vLLM twin (tensor_parallel_degree / tensor_parallel_size) are one setting: the
            # higher layer's spelling replaces the lower one's, as the same spelling would
            for twin in (key, OPTION_TWINS.get(key)):
                if twin in below and twin in sources:
                    overridden.append(f"option.{twin} from {origin} (over {sources[twin]})")
                    del options[twin], sources[twin]
            options[key] = value
            sources[key] = origin
    # one line per key (a line stays short however many keys are overridden); keys and origins only, never values
    reasons += [f"settings overridden: {line}" for line in overridden]

    env_server = {key: value for env_name, key in ENV_SERVER_ALIASES if (value := env.get(env_name, "").strip())}
    server = {**file_server, **env_server} if is_image_default else {**env_server, **file_server}
    settings = Settings.from_options(
        options,
        sources,
        server=server,
        properties_path=str(path) if path else None,
        host=host or "0.0.0.0",
        port=_port(env, port),
    )
    return settings, reasons
