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
    code: int | None
    message: str


Event = Token | Final | StreamError


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
    text = raw.decode("utf-8").strip()
    if text.startswith("data:"):
        text = text[len("data:") :].strip()
    if not text or text == "[DONE]":
        return
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        yield StreamError(None, f"not a JSON line: {text[:200]!r}")
        return
    if not isinstance(obj, dict):
        yield StreamError(None, f"not a JSON object: {text[:200]!r}")
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
            piece = (choice.get("delta") or {}).get("content") if "delta" in choice else choice.get("text")
            if piece:
                yield Token(piece)
    if obj.get("generated_text") is not None:
        yield Final(obj["generated_text"], obj.get("details"))
