"""LMI (TGI-schema) requests ⇄ vLLM completion requests: pure functions, no I/O.

`entrypoint.lmi.middleware` feeds these from inside vLLM's server. Data flow for one request:

    /invocations body ─classify_body─▶ "inputs" ─parse_lmi_request─▶ vLLM /v1/completions body
    vLLM JSON answer ─completion_to_lmi─▶ {"generated_text", "details"}
    vLLM SSE stream ─LMIStreamTranslator─▶ application/jsonlines token lines + final line
    vLLM error body ─vllm_error_to_lmi─▶ {"code": N, "error": "..."}

Bodies with "prompt" or "messages" are classified and then left untouched. The LMI names and
defaults follow djl-serving's vLLM handler (../shared/reference/lmi-sagemaker-contract.md).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

try:  # vLLM depends on msgspec (0.26 and 0.32): 3-10x faster than json on the per-token path
    import msgspec

    _msgspec_decode: Any = msgspec.json.decode
    _msgspec_encode: Any = msgspec.json.encode
except ImportError:  # pragma: no cover - only without vLLM installed
    _msgspec_decode = _msgspec_encode = None

LMI_DEFAULT_MAX_NEW_TOKENS = 30  # LMI's default; users complain it is short, but clients rely on it
CUSTOM_ATTRIBUTES_HEADER = "x-amzn-sagemaker-custom-attributes"
CUSTOM_ATTRIBUTES_MAX_CHARS = 1024  # SageMaker's own limit on CustomAttributes


class Schema(StrEnum):
    LMI = "inputs"  # TGI-style {"inputs", "parameters", "stream"}: translated
    COMPLETION = "prompt"  # OpenAI completions: passed through
    CHAT = "messages"  # OpenAI chat completions: passed through


class LMIError(Exception):
    """A request LMI answers with `{"code": N, "error": "..."}` and HTTP status N."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message

    def body(self) -> dict[str, Any]:
        return {"code": self.code, "error": self.message}


_JSON_TYPE_NAMES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


def _bad(field_name: str, value: object, expected: str) -> LMIError:
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return LMIError(400, f"Input parsing failed: {field_name}={shown}: expected {expected}")


def loads_vllm(raw: bytes) -> Any:
    """Decode JSON that vLLM wrote (bounded numbers, valid UTF-8): msgspec, json as the fallback.

    Client bodies go through json.loads instead: msgspec refuses integers beyond 64 bits, which
    are valid JSON (and deserve vLLM's range error, not "not JSON").
    """
    if _msgspec_decode is not None:
        try:
            return _msgspec_decode(raw)
        except ValueError:
            pass
    return json.loads(raw)


# Characters Python's str.splitlines (and JavaScript's line terminators) treat as line breaks that JSON
# leaves raw: msgspec writes them unescaped, so a client splitting decoded text would cut a token line in
# two (hypothesis found U+0085 in a fresh-clone make test). Escaping them keeps one JSON line per line.
_RAW_LINE_BREAKS = ((b"\xc2\x85", b"\\u0085"), (b"\xe2\x80\xa8", b"\\u2028"), (b"\xe2\x80\xa9", b"\\u2029"))


def dumps_line(obj: Any) -> bytes:
    """One compact JSON document as UTF-8 bytes (text with lone surrogates falls back to escapes)."""
    if _msgspec_encode is not None:
        try:
            out = _msgspec_encode(obj)
        except (UnicodeEncodeError, TypeError, OverflowError):
            pass
        else:
            for raw, escaped in _RAW_LINE_BREAKS:
                if raw in out:
                    out = out.replace(raw, escaped)
            return out
    return json.dumps(obj).encode()


# --------------------------------------------------------------------------------------------
# Which schema a body uses


class _NonFiniteConstant(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    """json.loads' hook for NaN, Infinity, -Infinity: Python accepts them, JSON (RFC 8259) does not."""
    raise _NonFiniteConstant(f"{name} is not a JSON number; send a finite number")


def _finite_float(literal: str) -> float:
    """json.loads' hook for number literals with a fraction or exponent: 1e400 would become inf."""
    value = float(literal)
    if not math.isfinite(value):
        raise _NonFiniteConstant(f"{literal[:40]} is out of the range of a double; send a finite number")
    return value


def _number_problem(exc: ValueError) -> str:
    if isinstance(exc, _NonFiniteConstant):
        return str(exc)
    if "integer string conversion" in str(exc):
        # Python refuses to convert longer integer literals (a CPU-exhaustion guard); its own message
        # points at sys.set_int_max_str_digits, which means nothing to a client.
        return f"body has an integer literal over {sys.get_int_max_str_digits()} digits"
    return f"body is not valid JSON ({exc})"


def classify_body(raw: bytes) -> tuple[Schema, dict[str, Any]]:
    """Decode an /invocations body and say which schema it uses; LMIError(400) when none fits."""
    if not raw.strip():
        raise LMIError(
            400, "Input parsing failed: empty request body; send a JSON object with 'inputs', 'prompt' or 'messages'"
        )
    try:
        body = json.loads(raw, parse_constant=_refuse_constant, parse_float=_finite_float)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LMIError(400, f"Input parsing failed: body is not valid JSON ({exc})") from None
    except RecursionError:  # b"[" * 100000: the decoder recurses per level
        raise LMIError(400, "Input parsing failed: body nests JSON arrays/objects too deeply") from None
    except ValueError as exc:  # an integer literal over sys.get_int_max_str_digits(), or NaN/Infinity
        raise LMIError(400, f"Input parsing failed: {_number_problem(exc)}") from None
    if not isinstance(body, dict):
        raise LMIError(
            400,
            f"Input parsing failed: body must be a JSON object with 'inputs', 'prompt' or 'messages', "
            f"got a JSON {_JSON_TYPE_NAMES.get(type(body), type(body).__name__)}",
        )
    present = [schema for schema in Schema if schema.value in body]
    if not present:
        keys = ", ".join(sorted(map(str, body))[:10]) or "none"
        raise LMIError(
            400,
            f"Input parsing failed: body must contain prompt, inputs, or messages (keys found: {keys})",
        )
    if len(present) > 1:
        both = " and ".join(repr(s.value) for s in present)
        raise LMIError(400, f"Input parsing failed: body has both {both}; send exactly one of them")
    return present[0], body


# --------------------------------------------------------------------------------------------
# LMI request → vLLM completion request


@dataclass(frozen=True)
class LMIRequest:
    """A validated LMI request and the vLLM completion body it became."""

    completion: dict[str, Any]  # JSON body for vLLM's completions handler
    stream: bool = False
    batch: bool = False  # "inputs" was a list: the answer is a list, one object per input
    details: bool = False
    decoder_input_details: bool = False
    seed: int | None = None
    # return_full_text when streaming: vLLM does not echo the prompt in a stream, so the final
    # line's generated_text gets it prepended here.
    stream_prefix: str = ""


# Fields the translation itself sets: a user sending them in "parameters" gets a 400 that names
# the LMI way to say it, instead of a silent override either way.
_RESERVED = {
    "prompt": "top-level 'inputs'",
    "stream": "top-level 'stream'",
    "stream_options": "top-level 'stream'",
    "model": "no model name (the server serves one model)",
    "max_tokens": "max_new_tokens",
    "echo": "return_full_text",
    "logprobs": "details",
    "prompt_logprobs": "decoder_input_details",
    "truncate_prompt_tokens": "truncate",
    "ignore_eos": "ignore_eos_token",
    "return_token_ids": "details",
    "return_tokens_as_token_ids": "details",
    "n": "one generation per input (send a list of inputs for several)",
    "best_of": "one generation per input",
}


# The "parameters" parse_lmi_request translates itself; any other key goes to vLLM by name.
LMI_PARAMETERS = frozenset(
    {
        "max_new_tokens",
        "temperature",
        "top_p",
        "top_k",
        "repetition_penalty",
        "seed",
        "truncate",
        "do_sample",
        "details",
        "decoder_input_details",
        "return_full_text",
        "ignore_eos_token",
        "stop",
        "stop_sequences",
    }
)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)  # type: ignore[arg-type]


def _want_bool(params: Mapping[str, Any], name: str) -> bool | None:
    value = params.get(name)
    if value is None or isinstance(value, bool):
        return value
    raise _bad(f"parameters.{name}", value, "true or false")


def _want_int(params: Mapping[str, Any], name: str, minimum: int) -> int | None:
    value = params.get(name)
    if value is None:
        return None
    if not _is_int(value) or value < minimum:
        raise _bad(f"parameters.{name}", value, f"an integer >= {minimum}")
    return value


def _want_number(params: Mapping[str, Any], name: str, low: float, high: float, low_open: bool) -> float | None:
    value = params.get(name)
    if value is None:
        return None
    bracket = "(" if low_open else "["
    if not _is_number(value) or value < low or (low_open and value == low) or value > high:
        upper = "inf" if math.isinf(high) else f"{high:g}"
        raise _bad(f"parameters.{name}", value, f"a number in {bracket}{low:g}, {upper}]")
    return float(value)


def _stop_list(params: Mapping[str, Any]) -> list[str]:
    stops: list[str] = []
    for name in ("stop_sequences", "stop"):
        value = params.get(name)
        if value is None:
            continue
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(s, str) and s for s in value):
            raise _bad(f"parameters.{name}", value, "a non-empty string or a list of non-empty strings")
        stops.extend(s for s in value if s not in stops)
    return stops


def _has_non_finite(value: object) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_non_finite(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_non_finite(item) for item in value)
    return False


def parse_lmi_request(body: Mapping[str, Any]) -> LMIRequest:
    """Validate an LMI body and build the vLLM completion request; LMIError(400) names the field."""
    inputs = body.get("inputs")
    batch = isinstance(inputs, list)
    if batch:
        if not inputs or not all(isinstance(item, str) for item in inputs):
            raise _bad("inputs", inputs, "a string, or a non-empty list of strings")
    elif not isinstance(inputs, str):
        raise _bad("inputs", inputs, "a string, or a non-empty list of strings")

    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _bad("stream", stream, "true or false")
    if stream and batch:
        raise _bad("stream", stream, "false when 'inputs' is a list (streaming takes one input)")

    params = body.get("parameters")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise _bad("parameters", params, "a JSON object")
    for name in params:
        if name in _RESERVED:
            raise LMIError(
                400,
                f"Input parsing failed: parameters.{name} is set by the LMI translation; "
                f"accepted instead: {_RESERVED[name]}",
            )

    max_new_tokens = _want_int(params, "max_new_tokens", 1)
    temperature = _want_number(params, "temperature", 0.0, math.inf, low_open=False)
    top_p = _want_number(params, "top_p", 0.0, 1.0, low_open=True)
    top_k = _want_int(params, "top_k", -1)
    repetition_penalty = _want_number(params, "repetition_penalty", 0.0, math.inf, low_open=True)
    seed = params.get("seed")
    if seed is not None and not _is_int(seed):
        raise _bad("parameters.seed", seed, "an integer")
    truncate = _want_int(params, "truncate", 1)
    do_sample = _want_bool(params, "do_sample")
    details = bool(_want_bool(params, "details"))
    decoder_input_details = bool(_want_bool(params, "decoder_input_details"))
    return_full_text = bool(_want_bool(params, "return_full_text"))
    ignore_eos = bool(_want_bool(params, "ignore_eos_token"))
    stops = _stop_list(params)

    # Any other key is a vLLM sampling field passed through by name (LMI does the same); vLLM
    # validates it and its 400 comes back in LMI's shape. What we forward must be JSON, so a
    # non-finite number (a caller that built the dict itself; classify_body refuses them) is a 400.
    completion: dict[str, Any] = {k: v for k, v in params.items() if k not in LMI_PARAMETERS}
    for name, value in completion.items():
        if _has_non_finite(value):
            raise _bad(f"parameters.{name}", value, "JSON values with finite numbers")
    completion["prompt"] = inputs
    completion["max_tokens"] = LMI_DEFAULT_MAX_NEW_TOKENS if max_new_tokens is None else max_new_tokens
    # LMI's do_sample defaults to false: greedy unless the client asks for sampling, either with
    # do_sample=true or by giving a temperature. do_sample=false wins over a temperature.
    if do_sample is False or (do_sample is None and temperature is None):
        completion["temperature"] = 0.0
    elif temperature is not None:
        completion["temperature"] = temperature
    for name, value in (("top_p", top_p), ("top_k", top_k), ("repetition_penalty", repetition_penalty)):
        if value is not None:
            completion[name] = value
    if seed is not None:
        completion["seed"] = seed
    if stops:
        completion["stop"] = stops
    if truncate is not None:
        completion["truncate_prompt_tokens"] = truncate
    if ignore_eos:
        completion["ignore_eos"] = True
    if return_full_text and not stream:
        completion["echo"] = True
    if details:
        completion["logprobs"] = 0  # the sampled token's logprob only
    if decoder_input_details and not stream:
        completion["prompt_logprobs"] = 0
    if details or decoder_input_details or stream:
        completion["return_token_ids"] = True  # ids for details.tokens and stream token lines
    if stream:
        completion["stream"] = True
    return LMIRequest(
        completion=completion,
        stream=stream,
        batch=batch,
        details=details,
        decoder_input_details=decoder_input_details and not stream,
        seed=seed,
        stream_prefix=inputs if stream and return_full_text and isinstance(inputs, str) else "",
    )


# --------------------------------------------------------------------------------------------
# vLLM completion answer → LMI answer


def finish_reason_to_lmi(finish_reason: str | None, stop_reason: int | str | None) -> str | None:
    """LMI's finish_reason from vLLM's pair (LMI itself reads the wrong field; this reads both).

    vLLM says "stop" for three different things; stop_reason tells them apart: None is the
    model's EOS token, an int is a stop token id (generation_config's extra EOS ids, or the
    client's stop_token_ids: end-of-sequence tokens too), a string is the matched stop sequence.
    """
    if finish_reason is None:
        return None
    if finish_reason == "length":
        return "length"
    if finish_reason == "stop":
        return "stop_sequence" if isinstance(stop_reason, str) else "eos_token"
    return finish_reason  # "abort", "error", or whatever a newer vLLM adds: passed on, not hidden


def _token_entries(choice: Mapping[str, Any]) -> list[dict[str, Any]]:
    """details.tokens from a choice's token_ids and logprobs (prompt entries dropped under echo)."""
    ids = choice.get("token_ids") or []
    logprobs = choice.get("logprobs") or {}
    texts = list(logprobs.get("tokens") or [])
    values = list(logprobs.get("token_logprobs") or [])
    # With echo, vLLM puts the prompt's tokens first in logprobs; the generated ones are the tail.
    texts, values = texts[len(texts) - len(ids) :], values[len(values) - len(ids) :]
    entries = []
    for i, token_id in enumerate(ids):
        entries.append(
            {
                "id": token_id,
                "text": texts[i] if i < len(texts) else None,
                "logprob": values[i] if i < len(values) else None,
            }
        )
    return entries


def _prefill_entries(choice: Mapping[str, Any]) -> list[dict[str, Any]]:
    """details.prefill: the prompt tokens with their logprobs (the first one has none, as in TGI)."""
    ids = choice.get("prompt_token_ids") or []
    prompt_logprobs = choice.get("prompt_logprobs") or []
    entries = []
    for i, token_id in enumerate(ids):
        entry = prompt_logprobs[i] if i < len(prompt_logprobs) else None
        info = (entry or {}).get(str(token_id)) or {}
        entries.append({"id": token_id, "text": info.get("decoded_token"), "logprob": info.get("logprob")})
    return entries


def _details(choice: Mapping[str, Any], req: LMIRequest, tokens: list[dict[str, Any]]) -> dict[str, Any]:
    details: dict[str, Any] = {
        "finish_reason": finish_reason_to_lmi(choice.get("finish_reason"), choice.get("stop_reason")),
        "generated_tokens": len(tokens),
        "seed": req.seed,
        "tokens": tokens,
    }
    if req.decoder_input_details:
        details["prefill"] = _prefill_entries(choice)
    return details


def completion_to_lmi(response: Mapping[str, Any], req: LMIRequest) -> dict[str, Any] | list[dict[str, Any]]:
    """vLLM's text_completion object → LMI's answer (a list when the request's inputs was a list)."""
    choices = sorted(response.get("choices") or [], key=lambda c: c.get("index", 0))
    answers = []
    for choice in choices:
        answer: dict[str, Any] = {"generated_text": choice.get("text", "")}
        if req.details or req.decoder_input_details:
            answer["details"] = _details(choice, req, _token_entries(choice))
        answers.append(answer)
    if req.batch:
        return answers
    if len(answers) != 1:
        raise LMIError(500, f"vLLM answered {len(answers)} choices for one input")
    return answers[0]


# --------------------------------------------------------------------------------------------
# Errors


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
    return LMIError(code if _is_int(code) and code >= 400 else 500, str(error.get("message", error)))


# --------------------------------------------------------------------------------------------
# Streaming: vLLM server-sent events → LMI jsonlines


def split_sse(data: bytes) -> tuple[list[bytes], bytes]:
    """Complete `data:` payloads in `data`, and the partial event left at its end."""
    events = data.split(b"\n\n")
    rest = events.pop()
    payloads = []
    for event in events:
        if event.startswith(b"data: ") and b"\n" not in event:  # vLLM's one-line events: fast path
            payloads.append(event[6:])
            continue
        lines = [line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
        if lines:
            payloads.append(b"\n".join(lines))
    return payloads, rest


def split_chunk_tokens(
    text: str, token_ids: list[int], token_texts: list[str] | None, token_logprobs: list[float | None] | None
) -> list[dict[str, Any]]:
    """One LMI token object per generated token of one vLLM stream chunk.

    vLLM usually sends one token per chunk. When it sends several (the detokenizer held back an
    incomplete UTF-8 sequence), each token gets its own line; the per-token texts come from the
    logprobs when they add up to the chunk's text, otherwise the whole text rides on the last
    token — so the concatenated token texts always equal the generated text.
    """
    if not token_ids:
        return []
    n = len(token_ids)
    if token_texts is not None and len(token_texts) == n and "".join(token_texts) == text:
        texts = list(token_texts)
    else:
        texts = [""] * (n - 1) + [text]
    values: list[float | None] = (
        list(token_logprobs) if token_logprobs is not None and len(token_logprobs) == n else [None] * n
    )
    return [{"id": token_id, "text": texts[i], "logprob": values[i]} for i, token_id in enumerate(token_ids)]


@dataclass
class LMIStreamTranslator:
    """Turns vLLM's completion SSE bytes into LMI jsonlines bytes, chunk by chunk.

    Line shape: {"index": i, "token": {"id", "text", "logprob"}, "generated_text": null,
    "details": null}; the last line carries generated_text (and details when asked). An error
    event becomes a final {"code": N, "error": "..."} line.
    """

    req: LMIRequest
    _rest: bytes = b""
    _text: list[str] = field(default_factory=list)
    _tokens: list[dict[str, Any]] = field(default_factory=list)
    _index: int = 0
    _pending: str = ""
    finished: bool = False  # the final line (answer or error) has been produced

    def feed(self, data: bytes) -> bytes:
        payloads, self._rest = split_sse(self._rest + data)
        lines: list[dict[str, Any]] = []
        for payload in payloads:
            if self.finished or payload == b"[DONE]":
                continue
            try:
                event = loads_vllm(payload)
            except ValueError:
                lines.append(self._fail(LMIError(500, "vLLM sent an unreadable stream event")))
                continue
            lines.extend(self._on_event(event))
        return _jsonlines(lines)

    def close(self) -> bytes:
        """The stream ended: emits a final error line when vLLM stopped without finishing."""
        return self.fail(LMIError(500, "generation ended before a finish reason was sent"))

    def fail(self, error: LMIError) -> bytes:
        """A final error line for a failure outside the stream (an exception in the server)."""
        if self.finished:
            return b""
        return _jsonlines([self._fail(error)])

    def _fail(self, error: LMIError) -> dict[str, Any]:
        self.finished = True
        return error.body()

    def _on_event(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        error = error_from_stream_event(event)
        if error is not None:
            return [self._fail(error)]
        lines: list[dict[str, Any]] = []
        for choice in event.get("choices") or []:
            text = choice.get("text") or ""
            self._text.append(text)
            # Text that came without a token (vLLM flushing held-back text) rides on the next
            # token line, so the lines' texts always add up to generated_text.
            text, self._pending = self._pending + text, ""
            logprobs = choice.get("logprobs") or {}
            tokens = split_chunk_tokens(
                text, list(choice.get("token_ids") or []), logprobs.get("tokens"), logprobs.get("token_logprobs")
            )
            finish = choice.get("finish_reason")
            if not tokens and text:
                if finish is None:
                    self._pending = text
                else:  # nothing left to carry it: a text-only line (id null) ends the stream
                    tokens = [{"id": None, "text": text, "logprob": None}]
            for token in tokens:
                lines.append({"index": self._index, "token": token, "generated_text": None, "details": None})
                self._index += 1
            self._tokens.extend(t for t in tokens if t["id"] is not None)
            if finish is not None:
                final = lines.pop() if lines else {"index": self._index, "token": None, "details": None}
                final["generated_text"] = self.req.stream_prefix + "".join(self._text)
                if self.req.details:
                    final["details"] = _details(choice, self.req, self._tokens)
                lines.append(final)
                self.finished = True
        return lines


def _jsonlines(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(dumps_line(line) + b"\n" for line in lines)


# --------------------------------------------------------------------------------------------
# SageMaker CustomAttributes


def parse_custom_attributes(header: str | None) -> dict[str, str]:
    """`X-Amzn-SageMaker-Custom-Attributes: k=v;k2=v2` → {"k": "v", "k2": "v2"}.

    SageMaker passes the client's string through unchecked (up to 1024 characters), so nothing
    here raises: an entry without "=" becomes a key with an empty value, blanks are dropped, the
    first occurrence of a key wins.
    """
    if not header:
        return {}
    attributes: dict[str, str] = {}
    for entry in header[:CUSTOM_ATTRIBUTES_MAX_CHARS].split(";"):
        key, _, value = entry.partition("=")
        key = key.strip()
        if key and key not in attributes:
            attributes[key] = value.strip()
    return attributes
