"""The LMI middleware on the image's vLLM (0.26) and a GPU: checks and timings in one run.

Standard library only (the H200 host has no httpx/pytest), and no resolver (the host may lack its
dependencies): vLLM is started directly through entrypoint.serve's in-process CLI with the
middleware flag, on the tiny MoE generated on the development machine (carry .artifacts/tiny-moe).

    PYTHONPATH=/root/site:$PWD python3 -m benchmarks.serving.h200_middleware_check \\
        --model .artifacts/tiny-moe --out "$OUT"        # about 2-4 minutes (≤ 240 s to /ping)

Writes $OUT/server.log and $OUT/h200_middleware.csv, prints PASS/FAIL lines and a table; exit
status 1 when a check failed.
"""

from __future__ import annotations

import argparse
import csv
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.serving.bodies import PROMPT, count_tokens, stream_body
from benchmarks.sigterm import exit_on_sigterm
from entrypoint.utils.ports import free_port


class Client:
    def __init__(self, port: int) -> None:
        self.port = port

    def request(self, method: str, path: str, body: Any = None, raw: bytes | None = None) -> tuple[int, str, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        payload = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        conn.request(method, path, body=payload, headers=headers)
        response = conn.getresponse()
        data = response.read()
        conn.close()
        return response.status, response.getheader("content-type") or "", data


def wait_ready(proc: subprocess.Popen[bytes], client: Client, deadline_s: float) -> float:
    began = time.monotonic()
    while time.monotonic() - began < deadline_s:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode} before /ping 200; see server.log")
        try:
            if client.request("GET", "/ping")[0] == 200:
                return time.monotonic() - began
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"no /ping 200 within {deadline_s} s; see server.log")


def checks(client: Client) -> list[tuple[str, bool, str]]:
    results: list[tuple[str, bool, str]] = []

    def check(name: str, ok: bool, detail: str = "") -> None:
        results.append((name, ok, detail[:300]))

    body = {"inputs": PROMPT, "parameters": {"max_new_tokens": 8, "details": True, "ignore_eos_token": True}}
    status, ctype, data = client.request("POST", "/invocations", body)
    answer = json.loads(data) if status == 200 else {}
    details = answer.get("details") or {}
    check(
        "TGI schema with details",
        status == 200
        and details.get("generated_tokens") == 8
        and details.get("finish_reason") == "length"
        and len(details.get("tokens", [])) == 8,
        data.decode(errors="replace"),
    )

    status, ctype, data = client.request("POST", "/invocations", {**body, "stream": True})
    lines = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
    check(
        "streaming jsonlines",
        status == 200
        and ctype.startswith("application/jsonlines")
        and len(lines) == 8
        and lines[-1].get("generated_text") == answer.get("generated_text"),
        data.decode(errors="replace"),
    )

    chat = {"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 4, "logprobs": True, "top_logprobs": 1}
    status, _, data = client.request("POST", "/invocations", chat)
    check(
        "chat without a model name",
        status == 200 and json.loads(data).get("object") == "chat.completion",
        data.decode(errors="replace"),
    )

    status, _, data = client.request("POST", "/invocations", {"prompt": "Hello", "max_tokens": 4})
    check(
        "completions passthrough",
        status == 200 and json.loads(data).get("object") == "text_completion",
        data.decode(errors="replace"),
    )

    for name, raw, code in [
        ("empty body -> 400", b"", 400),
        ("unknown schema -> 400", b'{"text": "x"}', 400),
        ("too many new tokens -> 400", b'{"inputs": "x", "parameters": {"max_new_tokens": 100000}}', 400),
        (
            "streamed, too many new tokens -> 400",
            b'{"inputs": "x", "stream": true, "parameters": {"max_new_tokens": 100000}}',
            400,
        ),
        ("wrong type -> 400", b'{"inputs": "x", "parameters": {"top_p": "high"}}', 400),
    ]:
        status, _, data = client.request("POST", "/invocations", raw=raw)
        shaped = status == code and set(json.loads(data)) == {"code", "error"}
        check(name, shaped, f"{status} {data.decode(errors='replace')}")
    return results


def paired_latency(client: Client, requests: int) -> dict[str, float]:
    plain = ("/v1/completions", {"prompt": PROMPT, "max_tokens": 4, "temperature": 0})
    lmi = ("/invocations", {"inputs": PROMPT, "parameters": {"max_new_tokens": 4}})
    for _ in range(20):
        client.request("POST", *plain)
        client.request("POST", *lmi)
    a: list[float] = []
    b: list[float] = []
    for _ in range(requests):
        for path, body, out in ((*plain, a), (*lmi, b)):
            began = time.perf_counter()
            client.request("POST", path, body)
            out.append((time.perf_counter() - began) * 1000)
    return {
        "latency p50 plain /v1/completions (ms)": statistics.median(a),
        "latency p50 LMI /invocations (ms)": statistics.median(b),
        "middleware added latency, median paired difference (ms)": statistics.median(
            y - x for x, y in zip(a, b, strict=True)
        ),
    }


def streams(client: Client, lmi: bool, count: int, tokens: int) -> float:
    path = "/invocations" if lmi else "/v1/completions"

    def one(i: int) -> int:
        return count_tokens(client.request("POST", path, stream_body(i, tokens, lmi))[2], lmi)

    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=count) as pool:
        generated = sum(pool.map(one, range(count)))
    seconds = time.perf_counter() - began
    if generated != count * tokens:
        raise AssertionError(f"{'LMI' if lmi else 'plain'}: {generated} tokens, expected {count * tokens}")
    return generated / seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=".artifacts/tiny-moe")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out/serving-h200")))
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--stream-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--vllm-arg", action="append", default=[], help="extra `vllm serve` argument (repeat)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "entrypoint.serve",
        "serve",
        args.model,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--middleware",
        "entrypoint.lmi.middleware.LMIMiddleware",
        "--max-model-len",
        "512",
        "--gpu-memory-utilization",
        "0.3",
        *args.vllm_arg,
    ]
    exit_on_sigterm()  # unwind through `finally`, which kills the server's group and writes the CSV
    log = (args.out / "server.log").open("wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    client = Client(port)
    rows: dict[str, float] = {}
    failed = 0
    try:
        rows["start to first /ping 200 (s)"] = wait_ready(proc, client, 240)
        for name, ok, detail in checks(client):
            failed += not ok
            print(f"{'PASS' if ok else 'FAIL'}  {name}" + ("" if ok else f"  {detail}"))
        rows.update(paired_latency(client, args.requests))
        rates: dict[str, list[float]] = {"plain": [], "lmi": []}
        streams(client, False, args.streams, 4)
        for _ in range(args.rounds):
            rates["plain"].append(streams(client, False, args.streams, args.stream_tokens))
            rates["lmi"].append(streams(client, True, args.streams, args.stream_tokens))
        label = f"{args.streams} streams x {args.stream_tokens} tok"
        rows[f"throughput {label}, plain SSE (tok/s, median)"] = statistics.median(rates["plain"])
        rows[f"throughput {label}, LMI jsonlines (tok/s, median)"] = statistics.median(rates["lmi"])
        rows["throughput LMI / plain"] = statistics.median(rates["lmi"]) / statistics.median(rates["plain"])
        with ThreadPoolExecutor(max_workers=8) as pool:  # SIGTERM with 8 streams open
            body = {"inputs": PROMPT, "stream": True, "parameters": {"max_new_tokens": 480, "ignore_eos_token": True}}
            futures = [pool.submit(client.request, "POST", "/invocations", body) for _ in range(8)]
            time.sleep(0.5)
            signalled = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
            rows["exit after SIGTERM with 8 open streams (s)"] = time.monotonic() - signalled
            rows["exit code after SIGTERM"] = proc.returncode
            clean = 0
            for future in futures:
                try:
                    last = json.loads(future.result()[2].decode().splitlines()[-1])
                    clean += last.get("generated_text") is not None or set(last) == {"code", "error"}
                except Exception:
                    pass
            rows["streams ending in an answer or an error line (of 8)"] = clean
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
        with (args.out / "h200_middleware.csv").open("w", newline="") as handle:  # what was measured, even if cut
            writer = csv.writer(handle)
            writer.writerow(["metric", "value"])
            writer.writerows(rows.items())
    width = max(map(len, rows))
    for name, value in rows.items():
        print(f"{name.ljust(width)}  {value:10.3f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
