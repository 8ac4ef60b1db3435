"""serving.properties → the container's Environment, the way the container reads it back.

The container maps `OPTION_FOO_BAR=v` to `option.foo_bar` (entrypoint/config/settings.py), so a
properties file travels to SageMaker as environment variables when there is no S3 model prefix to
put it in. Keys without the `option.` prefix (server settings such as `engine`) travel under their
upper-case names. The result is checked against SageMaker's EnvironmentMap limits from botocore.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from entrypoint.utils.errors import ConfigError
from sagemaker_deploy.validation import service_model

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def env_name(key: str) -> str:
    """`option.max_model_len` → `OPTION_MAX_MODEL_LEN`; `engine` → `ENGINE` (`-` and `.` become `_`)."""
    name = re.sub(r"[.\-]", "_", key.strip()).upper()
    if not _ENV_NAME.fullmatch(name):
        raise ConfigError(key, name, "cannot be written as an environment variable name", "[A-Za-z0-9_.-]")
    return name


def properties_to_env(properties: Mapping[str, str]) -> dict[str, str]:
    env: dict[str, str] = {}
    origin: dict[str, str] = {}
    for key, raw in properties.items():
        name, value = env_name(key), raw.strip()  # compared as written to the env: " x" and "x" agree
        if name in env and env[name] != value:
            raise ConfigError(
                key, value, f"maps to {name}, which {origin[name]!r} also sets to {env[name]!r}", "one of them"
            )
        env[name] = value
        origin[name] = key
    return env


def check_env_limits(env: Mapping[str, str]) -> None:
    """SageMaker's limits on ContainerDefinition.Environment (EnvironmentMap in botocore's model)."""
    shape = service_model("sagemaker").shape_for("EnvironmentMap")
    max_entries = shape.metadata["max"]
    max_key, max_value = shape.key.metadata["max"], shape.value.metadata["max"]
    if len(env) > max_entries:
        raise ConfigError("Environment", f"{len(env)} entries", f"SageMaker allows at most {max_entries}")
    for key, value in env.items():
        if len(key) > max_key:
            raise ConfigError(key, f"{len(key)} characters", f"env names are limited to {max_key} characters")
        if len(value) > max_value:
            raise ConfigError(
                key,
                f"{len(value)} characters",
                f"env values are limited to {max_value} characters on SageMaker; put long values "
                "(e.g. speculative_config) in a serving.properties beside the weights (--model-data)",
            )
