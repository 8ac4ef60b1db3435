"""LMI compatibility inside vLLM's own server: a pure ASGI middleware on POST /invocations.

Loaded by `vllm serve --middleware entrypoint.lmi.middleware.LMIMiddleware` (the resolver puts
that flag in every plan), so there is no second process and no extra network hop. Everything else
(/v1/*, GET requests) goes straight to vLLM without being touched, and so do /ping and /health while the engine
process lives (once it is gone they answer 503 here, before vLLM's own check has noticed: engine_processes.py).

On /invocations the body is read once and classified (entrypoint.lmi.request):
- "prompt" / "messages": replayed to vLLM's /invocations unchanged (content-type set to JSON); only a
  400 of vLLM's is looked at, to name the field its router did not (refusal.py);
- "inputs": translated to a completion body and sent to vLLM's /invocations handler, whose answer
  is translated back — JSON (response.py), or SSE → application/jsonlines when streaming (stream.py); in TGI's
  shapes under option.tgi_compat (a unary answer in an array, SSE streams: entrypoint.utils.response_format);
- anything else: an LMI error {"code": 400, "error": ...} without reaching vLLM.

The path stays /invocations (not /v1/completions) so vLLM's SageMaker hooks — adapter and session
headers — still apply, and `--api-key`, which guards /v1 only, keeps its documented scope.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Any

from entrypoint.lmi.engine_processes import EngineProcesses
from entrypoint.lmi.errors import LMIError
from entrypoint.lmi.json_io import dumps_line, loads_vllm
from entrypoint.lmi.lifecycle import Message, Receive, Scope, engine_stopped, watch_lifespan
from entrypoint.lmi.refusal import completion_fields, lmi_refusal, openai_refusal
from entrypoint.lmi.request import (
    CUSTOM_ATTRIBUTES_HEADER,
    LMIRequest,
    Schema,
    TgiTokens,
    classify_body,
    parse_custom_attributes,
    parse_lmi_request,
)
from entrypoint.lmi.response import completion_to_lmi
from entrypoint.lmi.stream import LMIStreamTranslator
from entrypoint.lmi.warmup_gate import WarmupGate
from entrypoint.utils.response_format import ResponseFormat, StreamFormat

Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

logger = logging.getLogger("entrypoint.lmi")

INVOCATIONS = "/invocations"
# SageMaker's health check and vLLM's own: both answer 503 the moment the engine process is gone.
HEALTH_PATHS = ("/ping", "/health")
JSONLINES = b"application/jsonlines"
EVENT_STREAM = b"text/event-stream"
# SAGEMAKER_MAX_PAYLOAD_IN_MB is LMI's knob for the request size; unset means no limit here
# (SageMaker itself caps real-time payloads before they reach the container).
MAX_PAYLOAD_ENV = "SAGEMAKER_MAX_PAYLOAD_IN_MB"
_CUSTOM_ATTRIBUTES_KEY = CUSTOM_ATTRIBUTES_HEADER.encode("latin-1")
WARMING_UP = LMIError(503, "warming up: the server sends its own warm-up requests first (option.warmup)")


class _BodyTooLarge(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size  # bytes read when the limit was crossed: the body has at least these


def _max_payload_mb() -> float | None:
    value = os.environ.get(MAX_PAYLOAD_ENV, "").strip()
    if not value:
        return None
    try:
        megabytes = float(value)
    except ValueError:
        logger.warning("%s=%r is not a number; no request size limit applied", MAX_PAYLOAD_ENV, value)
        return None
    return megabytes if megabytes > 0 and math.isfinite(megabytes) else None


def _too_large(megabytes: float, limit: int, read: int, content_length: bytes | None) -> LMIError:
    """The 413: the limit as configured and in bytes, and the body's size (its Content-Length, else what was read)."""
    size = f"{int(content_length)} bytes" if content_length and content_length.isdigit() else f"at least {read} bytes"
    return LMIError(413, f"request body of {size} is over {MAX_PAYLOAD_ENV}={megabytes:g} MB ({limit} bytes)")


class LMIMiddleware:
    """ASGI middleware: LMI's TGI schema and error shape on /invocations, nothing else changed."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.max_payload_mb = _max_payload_mb()
        self.max_payload = None if self.max_payload_mb is None else int(self.max_payload_mb * 1024 * 1024)
        self.watch = _EngineWatch()
        self.engines = EngineProcesses()
        self.warmup = WarmupGate()
        self.format, why = ResponseFormat.from_env(os.environ)  # the plan's option.tgi_compat / output_formatter
        if why:
            logger.warning("responses: %s", why)
        self._tgi: TgiTokens | None = None  # read from vLLM's tokenizer on the first TGI request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, watch_lifespan(scope, receive, self.engines, self.warmup), send)
            return
        if self.warmup.holding and scope["type"] == "http":
            self.warmup.quiet.note(scope)  # a warm-up request stays out of the access log
        if scope["type"] == "http" and scope["path"] in HEALTH_PATHS:
            if self.engines.dead():
                # vLLM's own check notices a few ms later (entrypoint/lmi/engine_processes.py): never 200 in between.
                await _send_json(send, 503, LMIError(503, "the inference engine process is gone").body())
                return
            if self.warmup.holding:
                await _send_json(send, 503, WARMING_UP.body())
                return
        if scope["type"] != "http" or scope["path"] != INVOCATIONS or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        try:
            raw = await _read_body(receive, self.max_payload)
        except _BodyTooLarge as too_large:
            assert self.max_payload_mb is not None and self.max_payload is not None  # only a limit raises it
            length = _header(scope.get("headers", []), b"content-length")
            error = _too_large(self.max_payload_mb, self.max_payload, too_large.size, length)
            await _send_json(send, 413, error.body())
            return
        except _Disconnected:
            return
        header = _header(scope.get("headers", []), _CUSTOM_ATTRIBUTES_KEY)
        attributes = parse_custom_attributes(None if header is None else header.decode("latin-1"))
        if attributes:
            # Kept on the request for handlers that want them (request.state.custom_attributes).
            scope.setdefault("state", {})["custom_attributes"] = attributes
        try:
            schema, body = classify_body(raw)
            if schema is not Schema.LMI:
                await self._passthrough(schema, body, _json_scope(scope, raw), _replay(raw, receive), send)
                return
            req = parse_lmi_request(body, completion_fields(), details_default=self.format.tgi_compat)
        except LMIError as error:
            await _send_json(send, error.code, error.body())
            return
        if self.format.tgi_compat:
            req = replace(req, tgi=self._tgi_tokens(scope))
        translated = json.dumps(req.completion).encode()
        handle = self._stream if req.stream else self._unary
        await handle(req, _json_scope(scope, translated), _replay(translated, receive), send)

    def _tgi_tokens(self, scope: Scope) -> TgiTokens:
        """The served tokenizer's special ids and one token's text (vLLM 0.32's EngineClient.get_tokenizer()), read
        once. Without a tokenizer (a server started with --skip-tokenizer-init) the answers still go out, every token
        not special and a prompt token's missing text empty, and the log says why."""
        if self._tgi is None:
            engine = getattr(getattr(scope.get("app"), "state", None), "engine_client", None)
            try:
                tokenizer = engine.get_tokenizer()
                special = frozenset(int(i) for i in tokenizer.all_special_ids)
            except Exception as exc:
                logger.warning("tgi_compat: the tokenizer's special tokens are unknown (%s: %s); every token is "
                               "sent with special=false", type(exc).__name__, exc)  # fmt: skip
                self._tgi = TgiTokens(frozenset(), lambda token_id: "")
            else:
                self._tgi = TgiTokens(special, lambda token_id: _decode_one(tokenizer, token_id))
        return self._tgi

    async def _unary(self, req: LMIRequest, scope: Scope, receive: Receive, send: Send) -> None:
        status = 500
        chunks: list[bytes] = []
        responded = False

        async def capture(message: Message) -> None:
            # Answer as soon as vLLM's body is complete: its handler may still run background
            # work before returning, which the client must not wait for.
            nonlocal status, responded
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False) and not responded:
                    responded = True
                    status_out, payload = _unary_answer(req, status, b"".join(chunks))
                    if self.format.tgi_compat and status_out == 200 and not req.batch:
                        payload = [payload]  # TGI's unary answer is an array (LMI's tgi_compat does the same)
                    await _send_json(send, status_out, payload)

        try:
            await self.watch.call(self.app, scope, receive, capture)
        except _EngineStopped:
            if not responded:
                await _send_json(send, 503, ENGINE_STOPPED.body())
            return
        except Exception as exc:  # the engine failed under the handler: LMI's 500, logged
            logger.exception("LMI request failed inside vLLM")
            if not responded:
                await _send_json(send, 500, LMIError(500, f"inference failed: {type(exc).__name__}").body())
            return
        if not responded:  # vLLM returned without a complete body
            await _send_json(send, 500, LMIError(500, "vLLM ended the request without an answer").body())

    async def _stream(self, req: LMIRequest, scope: Scope, receive: Receive, send: Send) -> None:
        sse = self.format.stream is StreamFormat.SSE
        translator = LMIStreamTranslator(req, sse=sse)
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
                            (b"content-type", EVENT_STREAM if sse else JSONLINES),
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
            await self.watch.call(self.app, scope, receive, relay)
        except Exception as exc:
            if isinstance(exc, _EngineStopped):
                error = ENGINE_STOPPED
            else:
                logger.exception("LMI stream failed inside vLLM")
                error = LMIError(500, f"inference failed: {type(exc).__name__}")
            if ended:
                return
            if started:
                await send({"type": "http.response.body", "body": translator.fail(error), "more_body": False})
            else:  # nothing sent yet: the error's own status (503 for an engine stop, as in _unary)
                await _send_json(send, error.code, error.body())
            return
        if error_status is not None:
            error = lmi_refusal(req.completion, error_status, b"".join(error_chunks))
            await _send_json(send, error.code, error.body())

    async def _passthrough(
        self, schema: Schema, body: dict[str, Any], scope: Scope, receive: Receive, send: Send
    ) -> None:
        """OpenAI bodies go to vLLM as they are; answered here: an engine stop mid-request, and a 400
        that names no field (vLLM's router says only "Cannot find suitable handler")."""
        started = ended = event_stream = False  # started, ended: our own response's start and end have gone out
        refused: Message | None = None  # vLLM's 400 start, held until its body is complete
        refusal: list[bytes] = []

        async def track(message: Message) -> None:
            nonlocal started, ended, event_stream, refused
            if message["type"] == "http.response.start":
                if message["status"] == 400:
                    refused = message
                    return
                started = True
                content_type = _header(message.get("headers", []), b"content-type") or b""
                event_stream = content_type.startswith(b"text/event-stream")
            elif message["type"] == "http.response.body":
                more = message.get("more_body", False)
                if refused is not None:
                    refusal.append(message.get("body", b""))
                    if not more:
                        started = ended = True
                        await _send_refusal(send, refused, b"".join(refusal), schema, body)
                    return
                ended = not more
            await send(message)

        try:
            await self.watch.call(self.app, scope, receive, track)
        except _EngineStopped:
            error = {"error": {"message": ENGINE_STOPPED.message, "type": "ServiceUnavailableError", "code": 503}}
            if not started:
                await _send_json(send, 503, error)
            elif not ended:
                tail = b"data: " + json.dumps(error).encode() + b"\n\ndata: [DONE]\n\n" if event_stream else b""
                await send({"type": "http.response.body", "body": tail, "more_body": False})


# The engine stopped under an open request: SIGTERM (vLLM aborts or drains, then stops the engine
# while connections stay open) or the engine process died. Without this, such a request waits
# forever and uvicorn's shutdown waits for it, past SageMaker's 30 s.
ENGINE_STOPPED = LMIError(503, "the inference engine stopped (server shutting down or engine failure); retry")
GUARD_INTERVAL_S = 0.5


class _EngineStopped(Exception):
    pass


async def _send_refusal(send: Send, start: Message, raw: bytes, schema: Schema, body: dict[str, Any]) -> None:
    """vLLM's 400 for a pass-through body, its message replaced by the field that vLLM's request model refuses."""
    explained = openai_refusal(body, schema)
    if explained is None:  # nothing found here: vLLM's own answer, as it was
        await send(start)
        await send({"type": "http.response.body", "body": raw, "more_body": False})
        return
    headers = _without(list(start.get("headers", [])), b"content-type", b"content-length")
    await _send_json(send, 400, explained, headers)


def _decode_one(tokenizer: Any, token_id: int) -> str:
    try:
        return str(tokenizer.decode([token_id]))
    except Exception:  # an id the tokenizer cannot decode: an empty text, as TGI's clients need some text
        return ""


def _unary_answer(req: LMIRequest, status: int, raw: bytes) -> tuple[int, Any]:
    """vLLM's complete unary response → (status, LMI JSON)."""
    if status >= 400:
        error = lmi_refusal(req.completion, status, raw)
        return error.code, error.body()
    try:
        return 200, completion_to_lmi(loads_vllm(raw), req)
    except LMIError as error:
        return error.code, error.body()
    except (ValueError, AttributeError, TypeError) as exc:
        return 500, LMIError(500, f"unreadable vLLM answer: {exc}").body()


class _EngineWatch:
    """Ends requests that wait on a stopped engine: one poller per server, no task per request.

    Each guarded request registers its own task; a single background task checks the engine every
    GUARD_INTERVAL_S while requests are open and cancels them once it has stopped. The cancelled
    request turns the cancellation into _EngineStopped and answers it (see the callers).
    """

    def __init__(self) -> None:
        self.open: set[asyncio.Task[Any]] = set()
        self.stopped: set[asyncio.Task[Any]] = set()
        self.poller: asyncio.Task[None] | None = None
        self.scope: Scope | None = None  # any request's scope: it carries the app, hence the engine

    async def call(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        task = asyncio.current_task()
        if task is None:  # not inside a task (cannot happen under uvicorn): run unguarded
            await app(scope, receive, send)
            return
        self.scope = scope
        self.open.add(task)
        if self.poller is None or self.poller.done():
            self.poller = asyncio.get_running_loop().create_task(self._poll())
        try:
            await app(scope, receive, send)
        except asyncio.CancelledError:
            if task not in self.stopped:
                raise  # the client went away or the server is cancelling: not ours to answer
            task.uncancel()
            raise _EngineStopped from None
        finally:
            self.open.discard(task)
            self.stopped.discard(task)

    async def _poll(self) -> None:
        while self.open:
            await asyncio.sleep(GUARD_INTERVAL_S)
            if self.scope is not None and engine_stopped(self.scope):
                for task in self.open - self.stopped:
                    self.stopped.add(task)
                    task.cancel()


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
            raise _BodyTooLarge(size)
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


def _header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    """The value of header `name` (lower-case; the last one when repeated), without a dict per request."""
    value = None
    for key, item in headers:
        if key.lower() == name:
            value = item
    return value


def _without(headers: list[tuple[bytes, bytes]], *names: bytes) -> list[tuple[bytes, bytes]]:
    return [(k, v) for k, v in headers if k.lower() not in names]


def _json_scope(scope: Scope, body: bytes) -> Scope:
    """The request as vLLM should see it: a JSON body of this length (it checks content-type)."""
    headers = _without(list(scope.get("headers", [])), b"content-type", b"content-length")
    headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return {**scope, "headers": headers}


async def _send_json(send: Send, status: int, payload: Any, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    body = dumps_line(payload)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                *headers,
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})
