"""The requests a compile-cache bake sends: every shape class the served engine compiles for after its start.

vLLM captures CUDA graphs for the decode batch sizes at start, but some kernels still JIT-compile on first use while
serving (seen on the H200, 2026-12-01: 4-6 `fused_moe_kernel` variants per engine for prefill token counts outside
the captured sizes, and `_topk_topp_kernel` on the first seeded top-p batch of 8 or more). Triton specialises an
integer argument by whether it is 1 and whether it is divisible by 16, so prompt lengths on both sides of those
boundaries, a range of concurrent batch sizes, and seeded top-p / top-k sampling at 1, 8 and the batch limit cover
the variants a workload can reach.
"""

from __future__ import annotations

import http.client
import json
import logging
import random
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("entrypoint.bake_cache")
PROMPT_LENGTHS = (1, 2, 3, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1023,
                  1024, 1025, 2047, 2048, 4096, 8191, 8192)  # fmt: skip
SAMPLED = (
    {"temperature": 0.8, "top_p": 0.9, "top_k": 50},  # top-k and top-p
    {"temperature": 0.8, "top_p": 0.9},  # top-p only
    {"temperature": 0.8, "top_k": 50},  # top-k only
)


# The CPU engine's bake keeps its seeded batches to 8 x 36 tokens, one prefill step on the tiny model: vLLM 0.32's CPU
# engine dies on a seeded request whose prefill is chunked (entrypoint/resolve/cpu_engine.py). The plan turns chunked
# prefill off there, but a user's option.enable_chunked_prefill=true would bring the crash back, and the CPU engine
# runs eager, so larger batches would warm nothing.
CPU_MAX_SAMPLED_BATCH = 8


@dataclass(frozen=True)
class Batch:
    """Requests sent together (concurrently), so the engine schedules them as one batch."""

    label: str
    bodies: tuple[dict[str, Any], ...]


def _ids(rng: random.Random, n: int, vocab: int) -> list[int]:
    return [rng.randrange(min(100, vocab // 4), max(vocab - 100, vocab * 3 // 4)) for _ in range(n)]


def batches(
    model: str, vocab: int, max_model_len: int, max_num_seqs: int, max_sampled_batch: int | None = None, seed: int = 7
) -> list[Batch]:
    """The bake's traffic, smallest first; prompts of random token ids (the tokenizer is never needed).

    max_sampled_batch caps the seeded batches (the CPU engine: CPU_MAX_SAMPLED_BATCH)."""
    rng = random.Random(seed)
    out_tokens = 4

    def body(n: int, **sampling: Any) -> dict[str, Any]:
        return {"model": model, "prompt": _ids(rng, n, vocab), "max_tokens": out_tokens, "min_tokens": out_tokens,
                "ignore_eos": True, **(sampling or {"temperature": 0.0})}  # fmt: skip

    longest = max(1, max_model_len - out_tokens - 1)
    plan = [Batch(f"prompt {n}", (body(n),)) for n in PROMPT_LENGTHS if n <= longest]
    sizes = sorted({s for s in (2, 3, 4, 8, 16, 17, 32, 64, 128, 256, max_num_seqs) if s <= max_num_seqs})
    plan += [Batch(f"{s} at once", tuple(body(32) for _ in range(s))) for s in sizes]
    seeds = iter(range(10**9))  # every sampled request its own seed (vLLM's seeded path, not the batch-wide one)
    sampled_limit = min(max_num_seqs, max_sampled_batch or max_num_seqs)
    for sampling in SAMPLED:
        for s in sorted({1, 8, sampled_limit} & set(range(1, sampled_limit + 1))):
            bodies = tuple(body(32, **sampling, seed=next(seeds)) for _ in range(s))
            plan.append(Batch(f"{s} sampled {'/'.join(sorted(sampling))}", bodies))
    return plan


def _post(port: int, body: dict[str, Any], timeout: float) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read().decode(errors="replace")[:300]
    finally:
        conn.close()


def send(port: int, plan: Sequence[Batch], timeout: float = 600.0) -> int:
    """Send every batch (its requests at once) and wait for each; returns the number of requests answered 200.

    A request refused with 4xx (a prompt over a limit the plan does not show) is skipped and logged; anything else
    raises."""
    answered = 0
    for batch in plan:
        with ThreadPoolExecutor(max_workers=len(batch.bodies)) as pool:
            results = list(pool.map(lambda b: _post(port, b, timeout), batch.bodies))
        refused = [(status, text) for status, text in results if 400 <= status < 500]
        for status, text in results:
            if status == 200:
                answered += 1
            elif not 400 <= status < 500:
                raise RuntimeError(f"bake request '{batch.label}' got HTTP {status}: {text}")
        if refused:
            log.warning("bake-cache: '%s': %d of %d refused (first: HTTP %d %s)", batch.label, len(refused),
                        len(results), *refused[0])  # fmt: skip
    return answered
