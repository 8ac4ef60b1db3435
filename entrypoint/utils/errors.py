"""Errors that stop the container before anything is downloaded or loaded."""

from __future__ import annotations

from collections.abc import Iterable

from entrypoint.utils.redact import REDACTED, is_secret_env


class ConfigError(ValueError):
    """A configuration the container refuses: names the key, the value, why, and what would work.

    The CLI turns it into exit code 2 with the message on stderr.
    """

    def __init__(self, key: str, value: object, reason: str, accepted: Iterable[str] | str | None = None):
        self.key = key
        self.value = value
        self.reason = reason
        if accepted is None:
            self.accepted: str | None = None
        elif isinstance(accepted, str):
            self.accepted = accepted
        else:
            self.accepted = ", ".join(accepted)
        # a secret's value never reaches the message, even when the value itself is what is wrong (a NUL in a token)
        shown = REDACTED if _names_a_secret(key) and value not in (None, "") else value
        message = f"{key}={shown!r}: {reason}"
        if self.accepted:
            message += f". Accepted: {self.accepted}"
        super().__init__(message)


def _names_a_secret(key: str) -> bool:
    """Whether an error's key label names a secret option or variable: `option.hf_token`, `OPTION_API_KEY
    (option.api_key)`, `option.hf_token (in /path/serving.properties)` (the label's first word, or an option name in
    it; not the words of a file path)."""
    words = [word.strip("()") for word in key.split()]
    names = [words[0]] + [w for w in words[1:] if w.lower().startswith(("option.", "option_"))] if words else []
    return any(is_secret_env(name) for name in names)
