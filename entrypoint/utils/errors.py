"""Errors that stop the container before anything is downloaded or loaded."""

from __future__ import annotations

from collections.abc import Iterable


class ConfigError(ValueError):
    """A configuration the container refuses: names the key, the value, why, and what would work.

    The CLI turns it into exit code 2 with the message on stderr.
    """

    def __init__(
        self,
        key: str,
        value: object,
        reason: str,
        accepted: Iterable[str] | str | None = None,
        *,
        hide_value: bool = False,
    ):
        self.key = key
        self.value = value
        self.reason = reason
        if accepted is None:
            self.accepted: str | None = None
        elif isinstance(accepted, str):
            self.accepted = accepted
        else:
            self.accepted = ", ".join(accepted)
        # hide_value: a secret's (redact.is_secret_label), never in the message even when it is what is wrong
        message = f"{key}={'***' if hide_value else value!r}: {reason}"
        if self.accepted:
            message += f". Accepted: {self.accepted}"
        super().__init__(message)
