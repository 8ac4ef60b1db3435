"""What the LMI middleware costs, measured on one real server (the tiny MoE on the CPU engine).

    .venv/bin/python -m benchmarks.serving.bench_middleware [--requests 200] [--streams 64] [--out out/serving]

1. Start: `python -m entrypoint run-local` (what `make run` runs) until the first /ping 200.
2. Latency: the same greedy request, alternately as plain /v1/completions and as an LMI body on
   /invocations (translated by the middleware), plus an OpenAI body on /invocations (passed through);
   p50/p99 over --requests each. The difference of the p50s is the middleware's added latency.
3. Throughput: --streams concurrent streams of --stream-tokens tokens — plain /v1/completions SSE,
   an OpenAI body on /invocations, and LMI jsonlines — in alternating rounds: generated tokens per
   second over the wall time, and the API server's CPU milliseconds per streamed token (read from
   /proc; much steadier than wall time on a shared machine), medians of --rounds.

Prints a table and writes CSV rows (with versions and a timestamp) under --out.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.serving.bodies import PROMPT, count_tokens, stream_body
from benchmarks.serving.csv_log import append_rows
from tools.local_server import Server  # the same start/stop helper the end-to-end tests use


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process (the API server: vLLM's engine is another process)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def latency(url: str, requests: int, tokens: int) -> dict[str, list[float]]:
    shapes = {
        "/v1/completions (plain vLLM)": ("/v1/completions", {"prompt": PROMPT, "max_tokens": tokens, "temperature": 0}),
        "/invocations LMI inputs (translated)": (
            "/invocations",
            {"inputs": PROMPT, "parameters": {"max_new_tokens": tokens}},
        ),
        "/invocations OpenAI prompt (passthrough)": (
            "/invocations",
            {"prompt": PROMPT, "max_tokens": tokens, "temperature": 0},
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in shapes}
    with httpx.Client(base_url=url, timeout=60) as client:
        for _ in range(20):  # warm-up: connection, prefix cache, allocator
            for path, body in shapes.values():
                client.post(path, json=body).raise_for_status()
        for _ in range(requests):  # interleaved, so drift on a shared machine hits every shape alike
            for name, (path, body) in shapes.items():
                began = time.perf_counter()
                client.post(path, json=body).raise_for_status()
                times[name].append((time.perf_counter() - began) * 1000)
    return times


STREAM_SHAPES = {
    "/v1/completions SSE (plain vLLM)": ("/v1/completions", False),
    "/invocations OpenAI prompt SSE (passthrough)": ("/invocations", False),
    "/invocations LMI jsonlines (translated)": ("/invocations", True),
}


async def _streams(url: str, path: str, lmi: bool, count: int, tokens: int) -> tuple[int, float]:
    """Wall time to drain `count` concurrent streams; parsing happens after the clock stops, so the
    client's own JSON work (on the same 2 cores) does not pace the server differently per shape."""

    async def one(client: httpx.AsyncClient, i: int) -> bytes:
        async with client.stream("POST", path, json=stream_body(i, tokens, lmi)) as response:
            response.raise_for_status()
            return await response.aread()

    limits = httpx.Limits(max_connections=count)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
        began = time.perf_counter()
        answers = await asyncio.gather(*(one(client, i) for i in range(count)))
        seconds = time.perf_counter() - began
    return sum(count_tokens(raw, lmi) for raw in answers), seconds


def throughput(url: str, pid: int, streams: int, tokens: int, rounds: int) -> dict[str, dict[str, list[float]]]:
    """Per shape: wall-clock tokens/s and the API server's CPU ms per streamed token, per round."""
    results: dict[str, dict[str, list[float]]] = {name: {"tok/s": [], "cpu": []} for name in STREAM_SHAPES}
    asyncio.run(_streams(url, "/v1/completions", False, streams, 4))  # warm-up
    for _ in range(rounds):  # alternating, so load from other jobs hits every shape alike
        for name, (path, lmi) in STREAM_SHAPES.items():
            cpu_before = process_cpu_s(pid)
            generated, seconds = asyncio.run(_streams(url, path, lmi, streams, tokens))
            assert generated == streams * tokens, f"{name}: {generated} tokens, expected {streams * tokens}"
            results[name]["tok/s"].append(generated / seconds)
            results[name]["cpu"].append((process_cpu_s(pid) - cpu_before) * 1000 / generated)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=4, help="new tokens per latency request")
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--stream-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("out/serving"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    server = Server(["run-local"], args.out / "server.log").start()
    rows: list[dict[str, Any]] = [
        {"metric": "run-local start to first /ping 200", "value": server.started_in_s, "unit": "s"}
    ]
    try:
        times = latency(server.url, args.requests, args.tokens)
        for name, values in times.items():
            rows.append({"metric": f"latency p50 {name}", "value": percentile(values, 50), "unit": "ms"})
            rows.append({"metric": f"latency p99 {name}", "value": percentile(values, 99), "unit": "ms"})
        plain, lmi = rows[1]["value"], rows[3]["value"]
        rows.append({"metric": "middleware added latency (p50 LMI - p50 plain)", "value": lmi - plain, "unit": "ms"})
        # Each LMI request ran right after a plain one: the median of those paired differences is
        # far less sensitive to load from other jobs than the difference of two medians.
        names = list(times)
        paired = [b - a for a, b in zip(times[names[0]], times[names[1]], strict=True)]
        rows.append(
            {
                "metric": "middleware added latency (median of paired differences)",
                "value": statistics.median(paired),
                "unit": "ms",
            }
        )
        assert server.proc is not None
        label = f"{args.streams} streams x {args.stream_tokens} tok"
        results = throughput(server.url, server.proc.pid, args.streams, args.stream_tokens, args.rounds)
        for name, values in results.items():
            median_rate = statistics.median(values["tok/s"])
            rows.append({"metric": f"throughput {label}, {name}", "value": median_rate, "unit": "tok/s"})
            median_cpu = statistics.median(values["cpu"])
            rows.append({"metric": f"API-server CPU per token, {name}", "value": median_cpu, "unit": "ms"})
        names = list(STREAM_SHAPES)
        plain, lmi = (statistics.median(results[n]["tok/s"]) for n in (names[0], names[2]))
        rows.append({"metric": "throughput LMI / plain (medians)", "value": lmi / plain, "unit": "ratio"})
    finally:
        server.stop()

    import vllm

    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    extra = {
        "timestamp": stamp,
        "vllm": vllm.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "requests": args.requests,
    }
    csv_path = args.out / "bench_middleware.csv"
    columns = ["timestamp", "metric", "value", "unit", "vllm", "python", "machine", "requests"]
    append_rows(csv_path, columns, ({**extra, **row} for row in rows))
    width = max(len(r["metric"]) for r in rows)
    for row in rows:
        print(f"{row['metric'].ljust(width)}  {row['value']:10.3f} {row['unit']}")
    print(f"CSV: {csv_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
