"""Fused RoPE + FP8 on the H200: achieved GB/s against the read+write floor, and the compile count.

Bytes per token: q and k read (2 B each), the cos/sin row read (4·rot B), q and k written as fp8
(1 B each), positions (8 B) and dynamic scales (2 × 4 B). Floor = bytes ÷ the HBM bandwidth measured
in this run. Time: median of CUDA-graph replays (kernels launch in a few µs, so small T measure
launch latency, which is the point for decode). compiles = binaries in the kernel's JIT cache after
all token counts 1..8192 ran (expected: 1 per config). CSV benchmarks/results/kernels/h200_rope_fp8.csv.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import torch

from benchmarks.paths import KERNEL_RESULTS
from tools.measure import graph_us, hbm_read_gbs, run_preamble

COLUMNS = ("config", "T", "us", "gbs", "floor_us", "pct_floor", "compiles", "gpu", "torch", "triton", "timestamp")
TOKENS = (1, 16, 64, 256, 1024, 4096, 8192)
HQ, HK, D = 32, 8, 128  # Llama-3-8B / Qwen3-style GQA heads


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=KERNEL_RESULTS)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_rope_fp8 needs an NVIDIA GPU", file=sys.stderr)
        return 2
    from kernel_checks.problems import rope_cos_sin_cache
    from ops.rope_fp8 import jit_binaries, rope_fp8, rope_fp8_kernel

    bw = hbm_read_gbs()
    dev = torch.cuda.current_device()
    meta = run_preamble(("torch", "triton"))
    tmax = max(TOKENS)
    qkv = torch.randn(tmax, (HQ + 2 * HK) * D, device="cuda", dtype=torch.bfloat16)
    pos = torch.randint(0, 8192, (tmax,), device="cuda")
    cache = rope_cos_sin_cache(8192, D, torch.Generator(device="cuda").manual_seed(0), device="cuda")
    rows = []
    for name, neox, static in (
        ("neox-dynamic", True, False),
        ("neox-static", True, True),
        ("gptj-dynamic", False, False),
    ):
        scales = dict(q_scale=torch.ones(1, device="cuda"), k_scale=torch.ones(1, device="cuda")) if static else {}

        def call(t, neox=neox, scales=scales):
            q = qkv[:t, : HQ * D].view(t, HQ, D)
            k = qkv[:t, HQ * D : (HQ + HK) * D].view(t, HK, D)
            return rope_fp8(q, k, pos[:t], cache, is_neox=neox, **scales)

        before = jit_binaries(rope_fp8_kernel, dev)
        for t in range(1, tmax + 1):  # every batch size a server could see
            call(t)
        torch.cuda.synchronize()
        compiles = jit_binaries(rope_fp8_kernel, dev) - before
        for t in TOKENS:
            us = graph_us(lambda t=t: call(t))
            nbytes = t * ((HQ + HK) * D * 3 + 4 * D + 8 + 8)
            floor = nbytes / (bw * 1e9) * 1e6
            rows.append(dict(config=name, T=t, us=round(us, 2), gbs=round(nbytes / us / 1e3, 1),
                             floor_us=round(floor, 2), pct_floor=round(100 * floor / us, 1),
                             compiles=compiles, **meta))  # fmt: skip
            print(f"rope {name:13s} T={t:5d} {us:8.2f} us {nbytes / us / 1e3:7.1f} GB/s "
                  f"({100 * floor / us:5.1f}% of floor) compiles={compiles}", flush=True)  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "h200_rope_fp8.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    return 0 if all(r["compiles"] == 1 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
