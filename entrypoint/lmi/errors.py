"""LMI's error answer `{"code": N, "error": "..."}`, and vLLM's error bodies and stream events turned into it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


class LMIError(Exception):
    """A request LMI answers with `{"code": N, "error": "..."}` and HTTP status N."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message

    def body(self) -> dict[str, Any]:
        return {"code": self.code, "error": self.message}


def shown(value: object) -> str:
    """A request value as an error message shows it: its repr, cut at 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def describe_field(field_name: str, value: object, expected: str) -> str:
    """`field=value: expected ...`: what a client needs to fix a field."""
    return f"{field_name}={shown(value)}: expected {expected}"


def field_error(field_name: str, value: object, expected: str) -> LMIError:
    """A 400 that names the request field, shows its value (cut at 80 characters) and says what is accepted."""
    return LMIError(400, f"Input parsing failed: {describe_field(field_name, value, expected)}")


def vllm_error_to_lmi(status: int, raw: bytes) -> LMIError:
    """Any error body vLLM or FastAPI writes → LMIError with the same status and the message.

    Shapes seen: {"error": {"message", "type", "code"}} (vLLM ≥ 0.11), {"object": "error",
    "message", "code"} (older), {"detail": "..."} and {"detail": [pydantic errors]} (FastAPI).
    """
    message: str | None = None
    try:
        body = json.loads(raw) if raw else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            message = error.get("message")
        elif isinstance(error, str):
            message = error
        elif isinstance(body.get("message"), str):
            message = body["message"]
        elif "detail" in body:
            detail = body["detail"]
            message = detail if isinstance(detail, str) else json.dumps(detail)[:1000]
    if message is None:
        message = raw.decode("utf-8", "replace")[:1000] or f"HTTP {status}"
    code = status if status >= 400 else 500
    if code < 500:
        message = f"Input parsing failed: {message}"
    return LMIError(code, message)


def error_from_stream_event(event: Mapping[str, Any]) -> LMIError | None:
    """An SSE event that carries an error (vLLM sends one when generation fails mid-stream)."""
    error = event.get("error")
    if not isinstance(error, dict):  # {"error": {...}} (vLLM ≥ 0.11), else the older flat error object
        if event.get("object") != "error":
            return None
        error = event
    code = error.get("code")
    is_status = isinstance(code, int) and not isinstance(code, bool) and code >= 400
    return LMIError(code if is_status else 500, str(error.get("message", error)))
