"""Parse a streamed answer (InvokeEndpointWithResponseStream PayloadParts) into tokens as they arrive.

The container streams LMI jsonlines: one JSON object per line, `{"token": {"text": ...}, ...}` per
token and a last line carrying `generated_text`; an error after the stream started arrives as a
`{"code": N, "error": "..."}` line. OpenAI-style chunks (chat `delta.content`, completion `text`,
possibly `data:`-prefixed) are understood too. Parts split lines anywhere, even inside UTF-8
characters, so bytes are buffered until a newline.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Token:
    text: str


@dataclass(frozen=True)
class Final:
    generated_text: str | None
    details: dict[str, Any] | None


@dataclass(frozen=True)
class StreamError:
    """An error the server sent as a line: `{"code": N, "error": "..."}`."""

    code: int | None
    message: str


@dataclass(frozen=True)
class Unreadable:
    """A line this parser cannot read (not UTF-8, not JSON, not an object): the stream is broken."""

    message: str


Event = Token | Final | StreamError | Unreadable


class StreamParser:
    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> Iterator[Event]:
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            yield from parse_line(line)

    def close(self) -> Iterator[Event]:
        """The stream ended: whatever is left is the last line (no trailing newline)."""
        rest, self._buffer = self._buffer, b""
        yield from parse_line(rest)


def parse_line(raw: bytes) -> Iterator[Event]:
    """One line's events; a line that is not UTF-8 JSON is an Unreadable event, never an exception."""
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError as exc:  # lines are whole here (split at b"\n"), so this is a bad byte
        yield Unreadable(f"a line is not UTF-8 ({exc.reason} at byte {exc.start}): {raw[:200]!r}")
        return
    if text.startswith("data:"):
        text = text[len("data:") :].strip()
    if not text or text == "[DONE]":
        return
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):  # JSONDecodeError, over-long integers, absurd nesting
        yield Unreadable(f"not a JSON line: {text[:200]!r}")
        return
    if not isinstance(obj, dict):
        yield Unreadable(f"not a JSON object: {text[:200]!r}")
        return
    if "error" in obj:
        error = obj["error"]
        message = error.get("message", str(error)) if isinstance(error, dict) else str(error)
        yield StreamError(obj.get("code") if isinstance(obj.get("code"), int) else None, message)
        return
    token = obj.get("token")
    if isinstance(token, dict) and isinstance(token.get("text"), str):
        yield Token(token["text"])
    elif isinstance(obj.get("choices"), list):
        for choice in obj["choices"]:
            # Shapes other than OpenAI's (a choice or delta that is not an object) carry no text.
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta")
            piece = delta.get("content") if isinstance(delta, dict) else choice.get("text")
            if isinstance(piece, str) and piece:
                yield Token(piece)
    if obj.get("generated_text") is not None:
        yield Final(obj["generated_text"], obj.get("details"))
