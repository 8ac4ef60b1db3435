"""vLLM's completion server-sent events → LMI's application/jsonlines, one token a line, chunk by chunk."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from entrypoint.lmi.errors import LMIError, error_from_stream_event
from entrypoint.lmi.json_io import dumps_line, loads_vllm
from entrypoint.lmi.request import LMIRequest
from entrypoint.lmi.response import lmi_details, shape_tokens


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

    Line shape: {"index": i, "token": {"id", "text", "log_prob"}, "generated_text": null, "details": null} (TGI's
    token: "logprob" and "special"); the last line carries generated_text (and details when asked). An error event
    becomes a final {"code": N, "error": "..."} line.
    """

    req: LMIRequest
    sse: bool = False  # `data: {...}` events (option.tgi_compat, option.output_formatter=sse) instead of jsonlines
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
        return self._frame(lines)

    def close(self) -> bytes:
        """The stream ended: emits a final error line when vLLM stopped without finishing."""
        return self.fail(LMIError(500, "generation ended before a finish reason was sent"))

    def fail(self, error: LMIError) -> bytes:
        """A final error line for a failure outside the stream (an exception in the server)."""
        if self.finished:
            return b""
        return self._frame([self._fail(error)])

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
            shape_tokens(tokens, self.req.tgi)
            finish = choice.get("finish_reason")
            if not tokens and text:
                if finish is None:
                    self._pending = text
                else:  # nothing left to carry it: a text-only line (no id) ends the stream
                    tokens = [self._no_token(text)]
            for token in tokens:
                lines.append({"index": self._index, "token": token, "generated_text": None, "details": None})
                self._index += 1
            self._tokens.extend(t for t in tokens if t["id"] is not None and t["id"] >= 0)
            if finish is not None:
                final = lines.pop() if lines else {"index": self._index, "token": self._no_token(""), "details": None}
                final["generated_text"] = self.req.full_text_prefix(0) + "".join(self._text)
                if self.req.details:
                    final["details"] = self._final_details(choice)
                lines.append(final)
                self.finished = True
        return lines

    def _no_token(self, text: str) -> dict[str, Any] | None:
        """A line's token where vLLM sent text without one, or nothing at the end: LMI's line says so with a null id
        (or no token). TGI's clients require an int id and `special` on every event, so TGI's shape sends id -1, marked
        special when it carries no text (TGI: a special token may be left out when concatenating), as LMI's own
        placeholder token is."""
        if self.req.tgi is None:
            return {"id": None, "text": text, "log_prob": None} if text else None
        return {"id": -1, "text": text, "logprob": None, "special": not text}

    def _final_details(self, choice: Mapping[str, Any]) -> dict[str, Any]:
        details = lmi_details(choice, self.req, self._tokens)
        if self.req.tgi is not None:  # TGI's stream details (and LMI's `inputs`): no token list on the last event
            return {key: details[key] for key in ("finish_reason", "generated_tokens", "seed", "inputs")}
        return details

    def _frame(self, lines: list[dict[str, Any]]) -> bytes:
        if self.sse:  # as LMI's sse formatter and TGI write them; TGI's clients strip the "data:" prefix
            return b"".join(b"data: " + dumps_line(line) + b"\n\n" for line in lines)
        return b"".join(dumps_line(line) + b"\n" for line in lines)
