"""The streamed requests both middleware benchmarks send, and how their answers are counted.

Standard library only: `h200_middleware_check` runs on the H200 host, which has no httpx.
"""

from __future__ import annotations

import json
from typing import Any

PROMPT = "What is a mixture of experts?"


def stream_body(i: int, tokens: int, lmi: bool) -> dict[str, Any]:
    """One streamed request of exactly `tokens` new tokens: an LMI body, or an OpenAI completions body.

    `i` varies the prompt so concurrent streams do not share a prefix-cache hit.
    """
    if lmi:
        return {
            "inputs": f"{PROMPT} {i}",
            "stream": True,
            "parameters": {"max_new_tokens": tokens, "ignore_eos_token": True},
        }
    return {
        "prompt": f"{PROMPT} {i}",
        "max_tokens": tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
        "return_token_ids": True,
    }


def count_tokens(raw: bytes, lmi: bool) -> int:
    """Generated tokens in one streamed answer (LMI token lines, or vLLM's token_ids per SSE event)."""
    total = 0
    for line in raw.decode().splitlines():
        if lmi and line.strip():
            total += json.loads(line).get("token") is not None
        elif line.startswith("data: {"):
            total += len(json.loads(line[6:])["choices"][0].get("token_ids") or [])
    return total
