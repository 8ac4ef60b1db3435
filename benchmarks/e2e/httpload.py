"""Concurrent streaming requests against the real server, with the standard library only.

The H200 host has no HTTP client package beyond what vLLM vendors, so this uses `http.client`, one thread per
request, all released together by a barrier. Each request streams; the arrival time of every line that
carries tokens is taken on this process's clock, which gives the per-request timings `stats.summarize_batch`
reads (TTFT from submission, first and last token times, token count). Two wire formats:
- `sse`: OpenAI server-sent events (`data: {...}` lines, `data: [DONE]`); tokens counted from the final usage
  chunk (`stream_options.include_usage`);
- `jsonlines`: LMI's streaming (one JSON object per token, the last with `generated_text`).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StreamResult:
    status: int
    num_output_tokens: int
    submit_ts: float
    first_token_ts: float
    last_token_ts: float
    error: str = ""

    def timing(self) -> dict[str, float]:
        """The fields of stats.RequestTiming (a sample event's `requests` entry)."""
        return {
            "num_output_tokens": self.num_output_tokens,
            "ttft_s": self.first_token_ts - self.submit_ts,
            "first_token_ts": self.first_token_ts,
            "last_token_ts": self.last_token_ts,
        }


def _tokens_in(line: str, wire: str) -> int | None:
    """Tokens this line reports (None: a line without tokens); for sse the usage chunk is counted apart."""
    if wire == "jsonlines":
        data = json.loads(line)
        if set(data) == {"code", "error"}:
            raise RuntimeError(f"stream ended with an error line: {data}")
        return 1 if data.get("token") is not None else None
    if not line.startswith("data: ") or line == "data: [DONE]":
        return None
    data = json.loads(line[len("data: ") :])
    if "error" in data:
        raise RuntimeError(f"stream ended with an error event: {data['error']}")
    choices = data.get("choices") or []
    if not choices:
        return None
    text = choices[0].get("text", choices[0].get("delta", {}).get("content"))
    return 1 if text is not None else None


def stream_one(
    port: int, path: str, body: dict[str, Any], wire: str, barrier: threading.Barrier | None
) -> StreamResult:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    payload = json.dumps(body).encode()
    if barrier is not None:
        barrier.wait()
    submit = time.perf_counter()
    first = last = 0.0
    counted = 0
    usage_tokens: int | None = None
    try:
        conn.request("POST", path, body=payload, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        if response.status != 200:
            return StreamResult(
                response.status, 0, submit, submit, submit, response.read()[:500].decode(errors="replace")
            )
        for raw in response:
            now = time.perf_counter()
            line = raw.decode().strip()
            if not line:
                continue
            if wire == "sse" and line.startswith("data: {") and '"usage"' in line:
                usage = json.loads(line[len("data: ") :]).get("usage") or {}
                usage_tokens = usage.get("completion_tokens", usage_tokens)
            tokens = _tokens_in(line, wire)
            if tokens:
                first = first or now
                last = now
                counted += tokens
        return StreamResult(200, usage_tokens if usage_tokens is not None else counted, submit, first, last)
    except (OSError, RuntimeError, ValueError) as exc:
        return StreamResult(0, counted, submit, first or submit, last or submit, f"{type(exc).__name__}: {exc}")
    finally:
        conn.close()


def run_batch(port: int, path: str, bodies: Sequence[dict[str, Any]], wire: str) -> tuple[list[StreamResult], float]:
    """All requests at once; (results in order, wall seconds from release to the last answer)."""
    barrier = threading.Barrier(len(bodies) + 1)
    with ThreadPoolExecutor(max_workers=len(bodies)) as pool:
        futures = [pool.submit(stream_one, port, path, body, wire, barrier) for body in bodies]
        barrier.wait()
        t0 = time.perf_counter()
        results = [f.result() for f in futures]
    return results, time.perf_counter() - t0
