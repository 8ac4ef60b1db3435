"""`python -m entrypoint.warmup --port P --model M`: send the warm-up's requests to the server, exit 0 when all were
answered (entrypoint.warmup says why and when)."""

from __future__ import annotations

import argparse
import logging
import socket
import sys
import time

from entrypoint.warmup import DEFAULT_TIMEOUT_S, HEADER

PATH = "/invocations"  # not /v1: `--api-key` guards /v1 only, and the middleware's path is what users call

log = logging.getLogger("entrypoint.warmup")


def wait_listening(host: str, port: int, deadline: float) -> bool:
    """True once host:port accepts a connection (the server listens only after its start-up hooks ran)."""
    while time.time() < deadline:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.2)
    return False


def run(host: str, port: int, model: str, vllm_args: list[str], max_sampled_batch: int | None, timeout_s: float) -> int:
    from entrypoint.warmup import traffic

    t0 = time.perf_counter()
    if not wait_listening(host, port, time.time() + timeout_s):
        log.error("warm-up: nothing listens on %s:%d after %.0f s", host, port, timeout_s)
        return 1
    vocab, max_len, max_seqs = traffic.model_limits(model, vllm_args, "warm-up")
    batches = traffic.batches(None, vocab, max_len, max_seqs, max_sampled_batch)
    try:
        answered = traffic.send(
            port, batches, timeout=timeout_s, path=PATH, who="warm-up", headers={HEADER: "1"}, host=host
        )
    except (OSError, RuntimeError) as err:
        log.error("warm-up: %s", err)
        return 1
    log.info("warm-up: %d requests in %d batches answered in %.1f s", answered, len(batches), time.perf_counter() - t0)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m entrypoint.warmup", description="the server's own warm-up")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", required=True, help="the model vLLM serves (a local folder: its config.json)")
    parser.add_argument("--max-model-len", type=int)
    parser.add_argument("--max-num-seqs", type=int)
    parser.add_argument("--max-sampled-batch", type=int)
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S)
    args = sys.argv[1:] if argv is None else argv
    ns = parser.parse_args(args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    # the limit flags (checked as integers above) are read back from the argv as vLLM's would be
    return run(ns.host, ns.port, ns.model, args, ns.max_sampled_batch, ns.timeout)
