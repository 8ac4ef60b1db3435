"""option.warmup on the real CPU engine: `serve` holds /ping at 503 while the server sends itself the bake's traffic,
answers 200 only after every request was answered, and serves cold when the warm-up overruns its time."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from entrypoint.inputs.gather import build_plan
from entrypoint.resolve.cpu_engine import CPU_MAX_SAMPLED_BATCH
from entrypoint.warmup import traffic
from tools.local_server import CPU_ENV, Server


def serve(tiny_model: Path, log: Path, **env: str) -> Server:
    return Server(["serve", "--model", str(tiny_model), "--host", "127.0.0.1"], log, env=env).start()


def test_ping_answers_200_only_once_the_warmup_answered_every_request(tiny_model: Path, tmp_path: Path) -> None:
    server = serve(tiny_model, tmp_path / "serve.log", OPTION_WARMUP="on")
    try:
        log = server.log_path.read_text(errors="replace")
        plan = build_plan(model=str(tiny_model), environ={**CPU_ENV, "OPTION_WARMUP": "on"})
        vocab, max_len, max_seqs = traffic.model_limits(plan.model, plan.vllm_args, "warm-up")
        batches = traffic.batches(None, vocab, max_len, max_seqs, CPU_MAX_SAMPLED_BATCH)
        assert "reason: warmup: on (option.warmup): the server sends itself the bake's requests" in log
        answered = re.search(r"warm-up: (\d+) requests in (\d+) batches answered", log)
        assert answered, log[-3000:]
        assert (int(answered[1]), int(answered[2])) == (sum(len(b.bodies) for b in batches), len(batches))
        # the health checks of Server.start saw 503 while it ran, and the first 200 only after it was done
        done = log.index("warm-up: done after")
        pings = [(m.start(), m[1]) for m in re.finditer(r'"GET /ping HTTP/1.1" (\d{3})', log)]
        assert any(code == "503" and at < done for at, code in pings), pings
        assert all(at > done for at, code in pings if code == "200"), pings
        # its 1600 requests left the access log (entrypoint.lmi.warmup_gate.QuietWarmupRequests); the pings did not
        assert '"POST /invocations HTTP/1.1"' not in log
        with httpx.Client(base_url=server.url, timeout=60) as client:
            body = {"inputs": "warm", "parameters": {"max_new_tokens": 2, "do_sample": True, "seed": 3}}
            assert client.post("/invocations", json=body).status_code == 200
    finally:
        server.stop()


def test_a_warmup_past_its_time_is_cut_and_the_server_serves_cold(tiny_model: Path, tmp_path: Path) -> None:
    server = serve(tiny_model, tmp_path / "serve.log", OPTION_WARMUP="on", MOE_WARMUP_TIMEOUT_S="1")
    try:
        log = server.log_path.read_text(errors="replace")
        assert "warm-up: not done after 1 s (MOE_WARMUP_TIMEOUT_S); serving without it" in log, log[-3000:]
        with httpx.Client(base_url=server.url, timeout=60) as client:
            assert client.get("/ping").status_code == 200
            body = {"prompt": [200] * 8, "max_tokens": 2, "temperature": 0.8, "top_p": 0.9, "seed": 1}
            assert client.post("/invocations", json=body).status_code == 200
    finally:
        server.stop()
