"""option.warmup, typed: whether the server sends its own warm-up requests before /ping answers 200.

Normalised once where the settings are read (entrypoint.config.settings); the resolver decides what `auto` means on
this GPU and engine (entrypoint.resolve.warmup).
"""

from __future__ import annotations

from enum import StrEnum

from entrypoint.config.moe import parse_choice


class Warmup(StrEnum):
    AUTO = "auto"
    ON = "on"
    OFF = "off"


# LMI-style booleans are accepted as on / off, the way a serving.properties author writes them.
_SPELLINGS = {"true": Warmup.ON, "false": Warmup.OFF, "1": Warmup.ON, "0": Warmup.OFF}


def parse_warmup(text: str | None, key: str = "option.warmup") -> Warmup:
    """The user's option.warmup as a Warmup; unset or empty is `auto`. `key` names where it was set."""
    return parse_choice(Warmup, text, key, "unknown value", _SPELLINGS, ["true", "false"])
