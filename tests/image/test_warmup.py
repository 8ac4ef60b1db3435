"""option.warmup in the container as SageMaker runs it: `docker run -e OPTION_WARMUP=on IMAGE serve` holds /ping at 503
while the server sends itself the bake's traffic from the installed package (`python -m entrypoint.warmup`), keeps those
requests out of the container's log, and answers 200 and serves once it is done. (On the cuda image `auto` turns it on;
the cpu image needs `on`.)"""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from entrypoint.resolve.cpu_engine import CPU_MAX_SAMPLED_BATCH
from entrypoint.warmup import traffic
from tests.image.conftest import readable_copy, running
from tests.image.container import Container


def test_the_container_holds_ping_until_its_warmup_answered_every_request(tiny_model: Path, model_root: Path) -> None:
    model = readable_copy(tiny_model, model_root / "warmup", serving_properties=None)
    # batches of up to 256 at once: a warm-up of a few seconds, long enough for /ping to be seen held
    env = {"OPTION_WARMUP": "on", "OPTION_MAX_ROLLING_BATCH_SIZE": "256"}
    container = Container(name="moe-image-test-warmup", model=model, env=env)
    with running(container):
        ready_s = container.wait_ready()
        logs = container.logs()
        assert "reason: warmup: on (option.warmup)" in logs
        answered = re.search(r"warm-up: (\d+) requests in (\d+) batches answered in ([\d.]+) s", logs)
        assert answered, logs[-3000:]
        # every request of the traffic the image's plan implies (its argv, as the startup log shows it) answered
        argv = re.search(r"exec: vllm serve (.*)", logs)
        assert argv, logs[:3000]
        args = argv[1].split()
        vocab, max_len, max_seqs = traffic.model_limits(str(tiny_model), args, "test")
        batches = traffic.batches(None, vocab, max_len, max_seqs, CPU_MAX_SAMPLED_BATCH)
        assert (int(answered[1]), int(answered[2])) == (sum(len(b.bodies) for b in batches), len(batches))
        held = [p.at_s for p in container.pings if p.status == 503]
        assert held and max(held) < ready_s, container.pings[-5:]  # 503 while it ran, then the 200
        assert "warm-up: done after" in logs and '"POST /invocations HTTP/1.1"' not in logs
        body = {"inputs": "warm", "parameters": {"max_new_tokens": 4, "do_sample": True, "top_p": 0.9, "seed": 2}}
        reply = httpx.post(container.url + "/invocations", json=body, timeout=120)
        assert reply.status_code == 200 and reply.json()["generated_text"], reply.text
        print(f"warm-up in the container: {answered[1]} requests in {answered[3]} s; /ping 200 after {ready_s:.0f} s")
