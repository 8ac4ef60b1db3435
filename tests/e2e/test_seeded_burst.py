"""A burst of seeded sampled requests on the CPU engine: the engine must still serve after it.

vLLM 0.32's CPU engine died on a seeded request whose prefill was split over steps (its model runner rewinds the
request's CPU torch.Generator with `set_offset`, which a CPU generator refuses: entrypoint/warmup/traffic.py). 256
seeded requests of 36 tokens at once are 9216 prompt tokens, more than one step takes, so some prefills are chunked:
any client of the cpu flavour could send that. The resolver turns chunked prefill off on the CPU engine
(entrypoint/config_resolver.py); this is the burst that killed the engine before it did.
"""

from __future__ import annotations

import asyncio
import random

import httpx

from tools.local_server import Server

BURST = 256
PROMPT_TOKENS = 36


async def _burst(url: str, model: str) -> list[int]:
    rng = random.Random(11)
    async with httpx.AsyncClient(base_url=url, timeout=300) as client:

        async def one(i: int) -> int:
            body = {"model": model, "prompt": [rng.randrange(100, 400) for _ in range(PROMPT_TOKENS)], "max_tokens": 4,
                    "temperature": 0.8, "top_p": 0.9, "seed": i}  # fmt: skip
            return (await client.post("/v1/completions", json=body)).status_code

        return list(await asyncio.gather(*(one(i) for i in range(BURST))))


def test_a_burst_of_seeded_requests_with_chunked_prefills_leaves_the_engine_serving(
    client: httpx.Client, server: Server
) -> None:
    model = client.get("/v1/models").json()["data"][0]["id"]
    statuses = asyncio.run(_burst(server.url, model))
    assert statuses == [200] * BURST, sorted(set(statuses))
    assert client.get("/ping").status_code == 200
    after = client.post("/v1/completions", json={"model": model, "prompt": [200] * 8, "max_tokens": 2, "seed": 1})
    assert after.status_code == 200
