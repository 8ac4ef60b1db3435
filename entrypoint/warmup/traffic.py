"""The requests the server's warm-up (entrypoint.warmup.send) and a compile-cache bake (entrypoint.bake_cache) send:
every shape class the served engine compiles for after its start.

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
from pathlib import Path
from typing import Any

from entrypoint.utils.argv import flag_value

log = logging.getLogger("entrypoint.warmup.traffic")
PROMPT_LENGTHS = (1, 2, 3, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1023,
                  1024, 1025, 2047, 2048, 4096, 8191, 8192)  # fmt: skip
SAMPLED = (
    {"temperature": 0.8, "top_p": 0.9, "top_k": 50},  # top-k and top-p
    {"temperature": 0.8, "top_p": 0.9},  # top-p only
    {"temperature": 0.8, "top_k": 50},  # top-k only
)


# When neither the argv nor config.json says: vLLM's own defaults on a large GPU, a common vocabulary.
DEFAULT_MAX_NUM_SEQS = 1024
DEFAULT_MAX_MODEL_LEN = 4096
DEFAULT_VOCAB = 32000


def model_limits(model: str, vllm_args: Sequence[str], who: str) -> tuple[int, int, int]:
    """vocab size, max_model_len, max_num_seqs of a served model (the argv first, then the checkpoint's config.json);
    a default taken is logged, its line starting with `who`."""
    config_path = Path(model) / "config.json"
    config = json.loads(config_path.read_text()) if config_path.is_file() else {}
    text = config.get("text_config", config)
    found = {
        "vocab_size": text.get("vocab_size") or config.get("vocab_size"),
        "max_model_len": flag_value(vllm_args, "--max-model-len") or text.get("max_position_embeddings"),
        "max_num_seqs": flag_value(vllm_args, "--max-num-seqs"),
    }
    defaults = {
        "vocab_size": DEFAULT_VOCAB, "max_model_len": DEFAULT_MAX_MODEL_LEN, "max_num_seqs": DEFAULT_MAX_NUM_SEQS,
    }  # fmt: skip
    for name, value in found.items():
        if value is None:
            log.info("%s: %s = %d (auto: neither the argv nor %s says)", who, name, defaults[name], config_path)
    vocab, max_len, max_seqs = (int(found[n] or defaults[n]) for n in ("vocab_size", "max_model_len", "max_num_seqs"))
    return vocab, max_len, max_seqs


@dataclass(frozen=True)
class Batch:
    """Requests sent together (concurrently), so the engine schedules them as one batch."""

    label: str
    bodies: tuple[dict[str, Any], ...]


def _ids(rng: random.Random, n: int, vocab: int) -> list[int]:
    return [rng.randrange(min(100, vocab // 4), max(vocab - 100, vocab * 3 // 4)) for _ in range(n)]


def batches(
    model: str | None,
    vocab: int,
    max_model_len: int,
    max_num_seqs: int,
    max_sampled_batch: int | None = None,
    seed: int = 7,
) -> list[Batch]:
    """The bake's traffic, smallest first; prompts of random token ids (the tokenizer is never needed).

    model None leaves the field out (vLLM serves its first model); max_sampled_batch caps the seeded batches (the CPU
    engine: entrypoint.resolve.cpu_engine.CPU_MAX_SAMPLED_BATCH)."""
    rng = random.Random(seed)
    out_tokens = 4

    def body(n: int, **sampling: Any) -> dict[str, Any]:
        named = {"model": model} if model is not None else {}
        return {**named, "prompt": _ids(rng, n, vocab), "max_tokens": out_tokens, "min_tokens": out_tokens,
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


def _post(
    host: str, port: int, body: dict[str, Any], timeout: float, path: str, headers: dict[str, str]
) -> tuple[int, str]:
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json", **headers})
        response = conn.getresponse()
        return response.status, response.read().decode(errors="replace")[:300]
    finally:
        conn.close()


def send(
    port: int,
    plan: Sequence[Batch],
    timeout: float = 600.0,
    path: str = "/v1/completions",
    who: str = "bake-cache",
    headers: dict[str, str] | None = None,
    host: str = "127.0.0.1",
) -> int:
    """Send every batch (its requests at once) to `path` and wait for each; returns the number answered 200.

    A request refused with 4xx (a prompt over a limit the plan does not show) is skipped and logged; anything else
    raises."""
    answered = 0
    for batch in plan:
        with ThreadPoolExecutor(max_workers=len(batch.bodies)) as pool:
            results = list(pool.map(lambda b: _post(host, port, b, timeout, path, headers or {}), batch.bodies))
        refused = [(status, text) for status, text in results if 400 <= status < 500]
        for status, text in results:
            if status == 200:
                answered += 1
            elif not 400 <= status < 500:
                raise RuntimeError(f"{who}: request '{batch.label}' got HTTP {status}: {text}")
        if refused:
            log.warning("%s: '%s': %d of %d refused (first: HTTP %d %s)", who, batch.label, len(refused),
                        len(results), *refused[0])  # fmt: skip
    return answered
