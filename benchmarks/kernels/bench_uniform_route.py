"""Where the one-launch uniform routing's 20.4 µs went (2026-12-05b profile), against vLLM's `uniform_random`.

    python -m benchmarks.kernels.bench_uniform_route [--shapes 128:8,8:2] [--ms 1,8,64,512] [--reps 3] [--out DIR]

`benchmarks/e2e/uniform_route.py` draws a uniform top-k in one Triton launch per MoE layer. Its first sampler (`topk`)
took 20.4 µs per launch at one token in the engine, where vLLM's strategy (`torch.rand`, `torch.topk`, `torch.ones`)
took 11.3 µs in three. Each variant here changes one suspect:

  vllm_three        vLLM's strategy as it runs in the engine (the three torch ops);
  topk_tile         the 2026-12-05b engine launch: the topk sampler, 16 tokens per program, 4 warps, the counter
                    bumped by an atomic (~6,000 SASS instructions on sm_90, all run once);
  no_atomic         the same without the atomic (the seed is read, never bumped: every call draws alike);
  one_warp          16 tokens per program, 1 warp: the argmax reductions stay inside a warp;
  token_per_warp    1 token per program, 1 warp: no masked rows in the argmax passes;
  token_per_warp_no_atomic  both;
  no_philox         topk_tile with a multiplicative hash for keys instead of Philox (timing only: not uniform;
                    ~5,400 instructions: Philox is not what makes the code long);
  compact           1 token per warp (4 keys per thread for 128 experts) and the top-k passes as a loop (~340
                    instructions);
  floyd             the engine's sampler now: a lane per token, Floyd's k-subset draw (~580 instructions);
  floyd_no_atomic   floyd without the atomic.

The launch took as long at 512 tokens (32 programs) as at one in the 2026-12-05b trace (18.9 against 20.7 µs), so the
cost is per launch, not per token. The lead is the code's length: `python -m benchmarks.kernels.uniform_route_code`
counts each variant's sm_90 instructions on any machine. If it holds, topk_tile and no_philox are slow in cold_code
(below), and compact and floyd are near vllm_three's single kernels.

Each cell: the median of --reps timings, each `tools/measure.graph_us` over 16 calls captured in one CUDA graph (the
engine replays its graph, so launch gaps are a graph's), spread (max − min) ÷ median beside it. Three conditions:

  warm       the calls back to back: the kernel's data stay in the caches, and its code as far as it fits;
  cold       each call after a read of a buffer larger than L2 (96 MiB): L2 holds neither data nor code, but the
             SMs' instruction caches may still hold the kernel (the read's own code is short);
  cold_code  each call after that read and two launches of long code on every SM (the topk sampler at 256 experts,
             top-k 7 and 6: ~13,000 instructions, ~210 KB): what the engine does, where ~14 other kernels (GEMMs
             and attention of long code) and ~40 MB of weights pass between two routing launches.
The time of what runs between calls is measured alone and subtracted. If code fetch is the cost, the long variants
are slow in cold_code and the short ones are not.

Writes h200_uniform_route.csv / .md into --out (default: the kernel results folder; h100_ on an H100). Then, on any
machine, `python -m benchmarks.kernels.plot_uniform_route` joins the timings with the instruction counts (table and
plot).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.paths import KERNEL_RESULTS

CALLS = 16  # launches per captured graph: one per MoE layer of a short model
SHAPES = ((128, 8), (8, 2))  # (experts, top_k): Qwen3-30B-A3B, Mixtral-8x7B
BENCH_M = (1, 8, 64, 512)
# variant → uniform_route keyword arguments (None: vLLM's three torch ops)
VARIANTS: dict[str, dict[str, Any] | None] = {
    "vllm_three": None,
    "topk_tile": {"sampler": "topk"},
    "no_atomic": {"sampler": "topk", "bump": False},
    "one_warp": {"sampler": "topk", "num_warps": 1},
    "token_per_warp": {"sampler": "topk", "tokens_per_program": 1, "num_warps": 1},
    "token_per_warp_no_atomic": {"sampler": "topk", "tokens_per_program": 1, "num_warps": 1, "bump": False},
    "no_philox": {"sampler": "topk", "philox": False},
    "compact": {"sampler": "topk", "tokens_per_program": 1, "num_warps": 1, "unroll": False},
    "floyd": {},
    "floyd_no_atomic": {"bump": False},
}
CONDITIONS = ("warm", "cold", "cold_code")
FLUSH_BYTES = 96 << 20  # > the H200's 50 MB L2
# (experts, top_k) of the code evictor: the topk sampler at shapes no row measures (its binaries would be warmed)
EVICTOR_SHAPES = ((256, 7), (256, 6))
COLUMNS = ("gpu", "torch", "triton", "timestamp", "condition", "experts", "top_k", "M",
           *(f"{v}_us" for v in VARIANTS), *(f"{v}_spread" for v in VARIANTS))  # fmt: skip


def variant_call(name: str, m: int, experts: int, top_k: int) -> Callable[[], None]:
    """One routing call of ``name`` for ``m`` tokens, on the GPU."""
    import torch

    from benchmarks.e2e.uniform_route import uniform_route

    kwargs = VARIANTS[name]
    if kwargs is None:  # vLLM 0.32's uniform_random (routing_simulator_router.py): rand, topk, ones

        def three() -> None:
            ids = torch.rand(m, experts, device="cuda").topk(top_k, dim=-1).indices.to(torch.int32)
            torch.ones_like(ids, dtype=torch.float32)

        return three
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    return lambda: uniform_route(counter, m, experts, top_k, torch.int32, **kwargs)


def spread(values: list[float]) -> float:
    median = statistics.median(values)
    return (max(values) - min(values)) / median if median else 0.0


def bench(
    shapes: tuple[tuple[int, int], ...], ms: tuple[int, ...], reps: int, on_row: Callable[[list[dict[str, Any]]], None]
) -> list[dict[str, Any]]:
    """Every (condition, shape, M) row; ``on_row(rows so far)`` after each, so a cut run keeps what it measured."""
    import torch

    from benchmarks.e2e.uniform_route import uniform_route
    from tools.measure import graph_us

    flush_buffer = torch.ones(FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
    flush_out = torch.empty((), dtype=torch.float32, device="cuda")

    def flush() -> None:
        torch.sum(flush_buffer, dim=0, out=flush_out)  # a whole-tensor sum has no out= form

    evictor_counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    evictor_tokens = 2 * 16 * torch.cuda.get_device_properties(0).multi_processor_count  # 2 programs per SM

    def evict_code() -> None:
        flush()
        for experts, top_k in EVICTOR_SHAPES:
            uniform_route(evictor_counter, evictor_tokens, experts, top_k, torch.int32, sampler="topk")

    between_calls: dict[str, Callable[[], None] | None] = {"warm": None, "cold": flush, "cold_code": evict_code}

    def timed(call: Callable[[], None], condition: str) -> float:
        between = between_calls[condition]
        if between is None:
            return graph_us(lambda: [call() for _ in range(CALLS)], calls=CALLS)
        pair = graph_us(lambda: [(between(), call()) for _ in range(CALLS)], calls=CALLS)
        return pair - graph_us(lambda: [between() for _ in range(CALLS)], calls=CALLS)

    rows = []
    for condition in CONDITIONS:
        for experts, top_k in shapes:
            for m in ms:
                calls = {v: variant_call(v, m, experts, top_k) for v in VARIANTS}
                times: dict[str, list[float]] = {v: [] for v in VARIANTS}
                for _ in range(reps):  # variants in turn, rep by rep: drift hits all alike
                    for v, call in calls.items():
                        times[v].append(timed(call, condition))
                row: dict[str, Any] = {"condition": condition, "experts": experts, "top_k": top_k, "M": m}
                for v, t in times.items():
                    row[f"{v}_us"], row[f"{v}_spread"] = round(statistics.median(t), 2), round(spread(t), 3)
                rows.append(row)
                print(markdown_row(row), flush=True)
                on_row(rows)
    return rows


def markdown_row(row: dict[str, Any]) -> str:
    cells = " | ".join(f"{row[f'{v}_us']:.2f} ({100 * row[f'{v}_spread']:.1f} %)" for v in VARIANTS)
    return f"| {row['condition']} | {row['experts']} / {row['top_k']} | {row['M']} | {cells} |"


def markdown(rows: list[dict[str, Any]]) -> str:
    head = "| condition | experts / top-k | M | " + " | ".join(f"{v} µs (spread)" for v in VARIANTS) + " |"
    return "\n".join([head, "|" + "---|" * (3 + len(VARIANTS)), *map(markdown_row, rows)]) + "\n"


def parse_shapes(text: str) -> tuple[tuple[int, int], ...]:
    try:
        shapes = tuple((int(e), int(k)) for e, k in (part.split(":") for part in text.split(",")))
    except ValueError:
        raise ValueError(f"--shapes {text!r}: accepted: EXPERTS:TOP_K[,EXPERTS:TOP_K...], e.g. 128:8,8:2") from None
    for e, k in shapes:
        if not 1 <= k <= e:
            raise ValueError(f"--shapes {text!r}: top_k {k} with {e} experts; accepted: 1 <= top_k <= experts")
    return shapes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.kernels.bench_uniform_route",
                                 description=__doc__.splitlines()[0])  # fmt: skip
    ap.add_argument("--shapes", default=",".join(f"{e}:{k}" for e, k in SHAPES))
    ap.add_argument("--ms", default=",".join(map(str, BENCH_M)))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=KERNEL_RESULTS)
    args = ap.parse_args(argv)
    try:
        shapes = parse_shapes(args.shapes)
        ms = tuple(int(m) for m in args.ms.split(","))
    except ValueError as exc:
        ap.error(str(exc))
    import torch

    if not torch.cuda.is_available():
        print("bench_uniform_route needs an NVIDIA GPU", file=sys.stderr)
        return 2
    from tools.measure import file_tag, run_preamble

    meta = run_preamble(("torch", "triton"))
    stem = f"{file_tag(meta['gpu'])}_uniform_route"  # h200_uniform_route, or h100_... on an H100 lease
    args.out.mkdir(parents=True, exist_ok=True)

    def write(rows: list[dict[str, Any]]) -> None:
        with open(args.out / f"{stem}.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
            writer.writeheader()
            writer.writerows({**meta, **r} for r in rows)
        (args.out / f"{stem}.md").write_text(markdown(rows))

    bench(shapes, ms, args.reps, write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
