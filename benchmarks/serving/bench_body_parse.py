"""What /invocations' body checks cost on top of decoding the JSON, per body shape (CPU only, no server).

    .venv/bin/python -m benchmarks.serving.bench_body_parse [--reps 7] [--out out/serving]

Every request's body goes through `classify_body`: `json.loads` with hooks that refuse NaN and out-of-range numbers,
then the envelope checks (the schema keys, and a walk of every key and string for a lone UTF-16 surrogate). The
baseline is `json.loads` of the same bytes in the same run: the decoding any server pays. The ratio
classify ÷ decode is what the checks add; a ratio near 1 means they cost nothing next to the decoding. Medians of
--reps timings, each the mean of enough calls to take ~50 ms; spread = (max - min) / median. Prints a table and
appends CSV rows (timestamp, Python, machine) under --out.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.e2e.stats import spread_pct
from benchmarks.serving.csv_log import append_rows
from entrypoint.lmi.request import classify_body


def bodies() -> dict[str, bytes]:
    """Shapes a deployment sees: a short LMI request, a long chat, a long ASCII prompt, a long non-ASCII one."""
    chat = [{"role": ("user", "assistant")[i % 2], "content": "word " * 100} for i in range(500)]
    shapes: dict[str, Any] = {
        "LMI, 240 characters": {"inputs": "Hello world " * 20, "parameters": {"max_new_tokens": 64}},
        "chat, 500 messages of 500 characters": {"messages": chat, "max_tokens": 64},
        "LMI, 4 M ASCII characters": {"inputs": "x" * 4_000_000},
        "LMI, 1 M non-ASCII characters (escaped)": {"inputs": "\N{LATIN SMALL LETTER E WITH ACUTE}" * 1_000_000},
    }
    return {name: json.dumps(body).encode() for name, body in shapes.items()}


def time_call(call: Callable[[], object], reps: int, budget_s: float = 0.05) -> list[float]:
    """`reps` timings in microseconds, each the mean of as many calls as fit in ~budget_s."""
    start = time.perf_counter()
    call()
    loops = max(1, int(budget_s / max(time.perf_counter() - start, 1e-7)))
    timings = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(loops):
            call()
        timings.append((time.perf_counter() - start) / loops * 1e6)
    return timings


def measure(reps: int) -> list[dict[str, Any]]:
    rows = []
    for name, raw in bodies().items():
        decode = time_call(lambda raw=raw: json.loads(raw), reps)
        classify = time_call(lambda raw=raw: classify_body(raw), reps)
        decode_us, classify_us = statistics.median(decode), statistics.median(classify)
        rows.append(
            {
                "body": name,
                "bytes": len(raw),
                "decode_us": round(decode_us, 2),
                "decode_spread_pct": round(spread_pct(decode), 1),
                "classify_us": round(classify_us, 2),
                "classify_spread_pct": round(spread_pct(classify), 1),
                "classify_over_decode": round(classify_us / decode_us, 3),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=7, help="timings per body and call (default 7)")
    parser.add_argument("--out", type=Path, default=Path("out/serving"), help="folder for bench_body_parse.csv")
    args = parser.parse_args(argv)
    if args.reps < 2:
        parser.error(f"--reps {args.reps}: accepted: 2 or more (a spread needs two timings)")
    rows = measure(args.reps)
    print(f"{'body':42} {'bytes':>9} {'json.loads µs':>15} {'classify_body µs':>18} {'ratio':>7}")
    for row in rows:
        print(
            f"{row['body']:42} {row['bytes']:>9} {row['decode_us']:>9.1f} ({row['decode_spread_pct']:.1f} %)"
            f" {row['classify_us']:>11.1f} ({row['classify_spread_pct']:.1f} %) {row['classify_over_decode']:>7.3f}"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "bench_body_parse.csv"
    stamp = {
        "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "reps": args.reps,
    }
    append_rows(path, [*stamp, *rows[0]], ({**stamp, **row} for row in rows))
    print(f"rows appended to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
