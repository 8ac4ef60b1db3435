"""Typed reads from a checkpoint's JSON config files, with errors that name the file and the dotted key."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from entrypoint.utils.errors import ConfigError

CONFIG_FILE = "config.json"
HF_QUANT_CONFIG_FILE = "hf_quant_config.json"


class ConfigJson:
    """Typed reads from one JSON object; every error names the file and the dotted key."""

    def __init__(self, data: Mapping[str, Any], file: str, path: str = ""):
        self.data = data
        self.file = file
        self.path = path

    def key(self, name: str) -> str:
        return f"{self.file}:{self.path}{name}"

    def has(self, name: str) -> bool:
        return self.data.get(name) is not None

    def fail(self, name: str, expected: str) -> ConfigError:
        """A ConfigError for `name` that says what was expected and what type was found."""
        value = self.data.get(name)
        return ConfigError(self.key(name), value, f"expected {expected}, got {type(value).__name__}")

    def sub(self, name: str) -> ConfigJson | None:
        value = self.data.get(name)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise self.fail(name, "a JSON object")
        return ConfigJson(value, self.file, f"{self.path}{name}.")

    def str_(self, name: str) -> str | None:
        value = self.data.get(name)
        if value is None or isinstance(value, str):
            return value
        raise self.fail(name, "a string")

    def int_(self, name: str, *, minimum: int = 0) -> int | None:
        value = self.data.get(name)
        if value is None:
            return None
        # bool is an int subclass in Python; `true` is never a count.
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(name, f"an integer >= {minimum}")
        return value

    def int_list(self, name: str, *, minimum: int = 0) -> list[int] | None:
        value = self.data.get(name)
        if value is None:
            return None
        if not isinstance(value, list) or any(
            isinstance(v, bool) or not isinstance(v, int) or v < minimum for v in value
        ):
            raise self.fail(name, f"a list of integers >= {minimum}")
        return value

    def int_or_uniform_list(self, name: str, *, minimum: int = 0) -> int | None:
        """An integer, or a per-layer list of them (Hunyuan's `moe_topk`); the largest value counts."""
        if isinstance(self.data.get(name), list):
            values = self.int_list(name, minimum=minimum)
            return max(values) if values else None
        return self.int_(name, minimum=minimum)

    def first(self, names: Iterable[str], read: Callable[[str], Any]) -> tuple[str, Any]:
        """The first of several alias keys that is set: (key, value); (first key, None) when none is."""
        names = tuple(names)
        for name in names:
            if self.has(name):
                return name, read(name)
        return names[0], None
