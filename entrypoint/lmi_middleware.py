"""LMI compatibility inside vLLM's own server: a pure ASGI middleware on POST /invocations.

Loaded by `vllm serve --middleware entrypoint.lmi_middleware.LMIMiddleware` (the resolver puts
that flag in every plan), so there is no second process and no extra network hop. Everything else
(/ping, /v1/*, GET requests) goes straight to vLLM without being touched.

On /invocations the body is read once and classified (entrypoint.lmi_translate):
- "prompt" / "messages": replayed to vLLM's /invocations unchanged (content-type set to JSON);
- "inputs": translated to a completion body and sent to vLLM's /invocations handler, whose answer
  is translated back — JSON, or SSE → application/jsonlines when streaming;
- anything else: an LMI error {"code": 400, "error": ...} without reaching vLLM.

The path stays /invocations (not /v1/completions) so vLLM's SageMaker hooks — adapter and session
headers — still apply, and `--api-key`, which guards /v1 only, keeps its documented scope.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from entrypoint.lmi_translate import (
    CUSTOM_ATTRIBUTES_HEADER,
    LMIError,
    LMIRequest,
    LMIStreamTranslator,
    Schema,
    classify_body,
    completion_to_lmi,
    parse_custom_attributes,
    parse_lmi_request,
    vllm_error_to_lmi,
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

logger = logging.getLogger("entrypoint.lmi")

INVOCATIONS = "/invocations"
JSONLINES = b"application/jsonlines"
# SAGEMAKER_MAX_PAYLOAD_IN_MB is LMI's knob for the request size; unset means no limit here
# (SageMaker itself caps real-time payloads before they reach the container).
MAX_PAYLOAD_ENV = "SAGEMAKER_MAX_PAYLOAD_IN_MB"


class _BodyTooLarge(Exception):
    pass


def _max_payload_bytes() -> int | None:
    value = os.environ.get(MAX_PAYLOAD_ENV, "").strip()
    if not value:
        return None
    try:
        megabytes = float(value)
    except ValueError:
        logger.warning("%s=%r is not a number; no request size limit applied", MAX_PAYLOAD_ENV, value)
        return None
    return int(megabytes * 1024 * 1024) if megabytes > 0 else None


class LMIMiddleware:
    """ASGI middleware: LMI's TGI schema and error shape on /invocations, nothing else changed."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.max_payload = _max_payload_bytes()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != INVOCATIONS or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        try:
            raw = await _read_body(receive, self.max_payload)
        except _BodyTooLarge:
            await _send_json(send, 413, LMIError(413, f"request body over {MAX_PAYLOAD_ENV} MB").body())
            return
        except _Disconnected:
            return
        headers = _headers(scope)
        attributes = parse_custom_attributes(headers.get(CUSTOM_ATTRIBUTES_HEADER))
        if attributes:
            # Kept on the request for handlers that want them (request.state.custom_attributes).
            scope.setdefault("state", {})["custom_attributes"] = attributes
        try:
            schema, body = classify_body(raw)
            if schema is not Schema.LMI:
                await self.app(_json_scope(scope, raw), _replay(raw, receive), send)
                return
            req = parse_lmi_request(body)
        except LMIError as error:
            await _send_json(send, error.code, error.body())
            return
        translated = json.dumps(req.completion).encode()
        if req.stream:
            await self._stream(req, _json_scope(scope, translated), _replay(translated, receive), send)
        else:
            await self._unary(req, _json_scope(scope, translated), _replay(translated, receive), send)

    async def _unary(self, req: LMIRequest, scope: Scope, receive: Receive, send: Send) -> None:
        status = 500
        chunks: list[bytes] = []

        async def capture(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        try:
            await self.app(scope, receive, capture)
        except Exception as exc:  # the engine failed under the handler: LMI's 500, logged
            logger.exception("LMI request failed inside vLLM")
            await _send_json(send, 500, LMIError(500, f"inference failed: {type(exc).__name__}").body())
            return
        raw = b"".join(chunks)
        if status >= 400:
            error = vllm_error_to_lmi(status, raw)
            await _send_json(send, error.code, error.body())
            return
        try:
            answer = completion_to_lmi(json.loads(raw), req)
        except (LMIError, ValueError, AttributeError, TypeError) as exc:
            error = exc if isinstance(exc, LMIError) else LMIError(500, f"unreadable vLLM answer: {exc}")
            await _send_json(send, error.code, error.body())
            return
        await _send_json(send, 200, answer)

    async def _stream(self, req: LMIRequest, scope: Scope, receive: Receive, send: Send) -> None:
        translator = LMIStreamTranslator(req)
        started = False  # our own response start has gone out
        ended = False  # our last body message (more_body False) has gone out
        error_status: int | None = None  # vLLM answered an error before streaming
        error_chunks: list[bytes] = []

        async def relay(message: Message) -> None:
            nonlocal started, ended, error_status
            if message["type"] == "http.response.start":
                if message["status"] >= 400:
                    error_status = message["status"]
                    return
                started = True
                await send(
                    {
                        "type": "http.response.start",
                        "status": message["status"],
                        "headers": [
                            *_without(message.get("headers", []), b"content-type", b"content-length"),
                            (b"content-type", JSONLINES),
                        ],
                    }
                )
            elif message["type"] == "http.response.body":
                body = message.get("body", b"")
                more = message.get("more_body", False)
                if error_status is not None:
                    error_chunks.append(body)
                    return
                out = translator.feed(body)
                if not more:
                    out += translator.close()
                if out or not more:
                    ended = not more
                    await send({"type": "http.response.body", "body": out, "more_body": more})

        try:
            await self.app(scope, receive, relay)
        except Exception as exc:
            logger.exception("LMI stream failed inside vLLM")
            error = LMIError(500, f"inference failed: {type(exc).__name__}")
            if ended:
                return
            if started:
                await send({"type": "http.response.body", "body": translator.fail(error), "more_body": False})
            else:
                await _send_json(send, 500, error.body())
            return
        if error_status is not None:
            error = vllm_error_to_lmi(error_status, b"".join(error_chunks))
            await _send_json(send, error.code, error.body())


class _Disconnected(Exception):
    pass


async def _read_body(receive: Receive, limit: int | None) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if limit is not None and size > limit:
            raise _BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive() that yields `body` once, then defers to the client's (for disconnects)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _without(headers: list[tuple[bytes, bytes]], *names: bytes) -> list[tuple[bytes, bytes]]:
    return [(k, v) for k, v in headers if k.lower() not in names]


def _json_scope(scope: Scope, body: bytes) -> Scope:
    """The request as vLLM should see it: a JSON body of this length (it checks content-type)."""
    headers = _without(list(scope.get("headers", [])), b"content-type", b"content-length")
    headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return {**scope, "headers": headers}


async def _send_json(send: Send, status: int, payload: Any) -> None:
    body = json.dumps(payload, ensure_ascii=False).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})
