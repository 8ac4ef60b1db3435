"""What vLLM's Mamba state-block lookup costs the host per call, per Mamba cache mode (issue 31, Nemotron).

    python -m benchmarks.e2e.mamba_host_cost [--calls 2000] [--reps 5] [--out FILE.csv]  (default: OUT below)

With prefix caching on, vLLM 0.32 serves a Mamba hybrid (Nemotron-3-Nano) in the `align` cache mode. Every decode step
then calls `mamba_get_block_table_tensor` once per Mamba KV-cache group (4 for this model), and in `align` it runs 7
small tensor ops to find each request's state block; in `none` (prefix caching off) it returns the block table as it
is. This times the function on CPU tensors with the installed vLLM (the CPU build in `make test`'s venv): the host's
share only. On a GPU each of those ops is also a kernel launch, so the engine pays more; the served comparison is
`bash benchmarks/device/e2e.sh nemotron-diag` (prefix caching off, then on).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.e2e.stats import spread_pct
from benchmarks.paths import E2E_RESULTS

MODES = ("none", "align")
OUT = E2E_RESULTS / "cpu_mamba_host_cost.csv"


def time_lookup(mode: str, calls: int, reps: int, block_size: int = 1024) -> list[float]:
    """µs per call of each repetition, for one decode request of 600 tokens."""
    import torch
    from vllm.v1.attention.backends.utils import mamba_get_block_table_tensor
    from vllm.v1.kv_cache_interface import MambaSpec

    spec = MambaSpec(block_size=block_size, shapes=((4, 4),), dtypes=(torch.float32,), mamba_cache_mode=mode)
    block_table = torch.arange(8, dtype=torch.int32).reshape(1, 8)
    seq_lens = torch.tensor([600], dtype=torch.int32)
    for _ in range(min(calls, 200)):  # untimed: the first calls pay for imports and allocator warm-up
        mamba_get_block_table_tensor(block_table, seq_lens, spec, mode)
    per_call = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            mamba_get_block_table_tensor(block_table, seq_lens, spec, mode)
        per_call.append((time.perf_counter() - t0) / calls * 1e6)
    return per_call


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.e2e.mamba_host_cost", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--calls", type=int, default=2000, help="calls per repetition")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", type=Path, default=OUT, help="a CSV: mode, median and spread of µs per call")
    args = parser.parse_args(argv)
    if args.calls < 1 or args.reps < 1:
        parser.error(f"--calls and --reps must be at least 1, got {args.calls} and {args.reps}")
    import vllm

    rows = []
    for mode in MODES:
        runs = time_lookup(mode, args.calls, args.reps)
        median, spread = statistics.median(runs), spread_pct(runs)
        rows.append({"vllm": vllm.__version__, "mode": mode, "us_per_call_median": round(median, 2),
                     "spread_pct": round(spread, 1), "calls": args.calls, "reps": args.reps})  # fmt: skip
        print(f"{mode}: {median:.2f} µs per call (spread {spread:.1f} %, {args.reps} × {args.calls} calls)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"mamba_host_cost: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
