"""How long each one-launch routing kernel's code is on sm_90: a count made on any machine, no GPU.

    PYTHONPATH=build/triton-3.7.1:. CUDA_VISIBLE_DEVICES= python -m benchmarks.kernels.uniform_route_code \
        [--shapes 128:8,8:2,256:8] [--out DIR]

Why: the first one-launch sampler (`topk`) took 20.4 µs per launch in the engine, as long at 512 tokens as at one
(benchmarks/results/e2e/issue33_2026-12-05b/SUMMARY.md). A cost per launch that does not grow with the work points at
something every launch pays; one candidate is fetching the kernel's code, which matters when the code is long and
runs once (no loop brings an instruction back to the cache). This compiles every variant that
`benchmarks.kernels.bench_uniform_route` times, as the engine launches it at one token, with the image's Triton
(3.7.1, `make triton-aot-env`) for sm_90 under kernels.aot.Sm90Driver, and reads the cubin with the NVIDIA tools Triton
ships (nvdisasm: instructions; cuobjdump: registers, shared memory, spills). The timing side of the question is
the bench's `cold_code` condition on the H200.

Writes cpu_uniform_route_code.csv / .md into --out (default: the kernel results folder).
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.paths import KERNEL_RESULTS

SHAPES = ((128, 8), (8, 2), (256, 8))  # Qwen3-30B-A3B / Nemotron-3-Nano's 128 experts, Mixtral-8x7B, DeepSeek-V3
INSTRUCTION_BYTES = 16  # every sm_90 instruction is 128 bits
COLUMNS = ("timestamp", "triton", "target", "experts", "top_k", "variant", "sampler", "instructions", "code_kib",
           "registers", "shared_bytes", "stack_bytes")  # fmt: skip


def nvidia_tool(name: str) -> Path:
    """A binary Triton ships for its NVIDIA backend (nvdisasm, cuobjdump), beside its ptxas."""
    import triton

    path = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    if not path.exists():
        raise FileNotFoundError(f"{path}: this Triton ships no {name}; run `make triton-aot-env`")
    return path


def cubin_facts(cubin: bytes) -> dict[str, int]:
    """Instructions (nvdisasm) and resource usage (cuobjdump -res-usage) of a one-kernel cubin."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        sass = subprocess.run([nvidia_tool("nvdisasm"), "-c", f.name], capture_output=True, text=True, check=True)
        usage = subprocess.run([nvidia_tool("cuobjdump"), "-res-usage", f.name], capture_output=True, text=True,
                               check=True)  # fmt: skip
    instructions = len(re.findall(r"/\*[0-9a-f]{4,}\*/", sass.stdout))  # each one's address comment
    resources = dict(re.findall(r"\b(REG|SHARED|STACK):(\d+)", usage.stdout))
    if not instructions or "REG" not in resources:
        raise RuntimeError(f"could not read the cubin: {sass.stdout[:200]!r} / {usage.stdout[:200]!r}")
    return {"instructions": instructions, "registers": int(resources["REG"]),
            "shared_bytes": int(resources.get("SHARED", 0)), "stack_bytes": int(resources.get("STACK", 0))}  # fmt: skip


def compile_variant(kwargs: dict[str, Any], experts: int, top_k: int) -> bytes:
    """The cubin of one variant's launch at one token (num_tokens = 1, as Triton specialises it at concurrency 1)."""
    import torch

    from benchmarks.e2e.uniform_route import Launch

    options = {k: v for k, v in kwargs.items() if k != "sampler"}
    launch = Launch.of(kwargs.get("sampler", "floyd"), experts, top_k, **options)

    def meta(*size: int, dtype: torch.dtype) -> torch.Tensor:
        return torch.empty(*size, dtype=dtype, device="meta")

    args = (meta(1, dtype=torch.int32), meta(1, top_k, dtype=torch.int32), meta(1, top_k, dtype=torch.float32), 1)
    compiled = launch.kernel.warmup(*args, **launch.constants, num_warps=launch.num_warps, grid=(1,))
    return compiled.asm["cubin"]


def count(shapes: tuple[tuple[int, int], ...]) -> list[dict[str, Any]]:
    import triton
    from triton.runtime.driver import driver

    from benchmarks.kernels.bench_uniform_route import VARIANTS
    from kernels.aot import Sm90Driver
    from tools.measure import utc_timestamp

    if os.environ.get("TRITON_INTERPRET"):
        raise RuntimeError("TRITON_INTERPRET is set: the interpreter compiles nothing; unset it")
    driver.set_active(Sm90Driver())
    rows, timestamp = [], utc_timestamp()
    for experts, top_k in shapes:
        for variant, kwargs in VARIANTS.items():
            if kwargs is None:  # vLLM's torch ops: not ours to compile
                continue
            facts = cubin_facts(compile_variant(kwargs, experts, top_k))
            code_kib = round(facts["instructions"] * INSTRUCTION_BYTES / 1024, 1)
            rows.append({"timestamp": timestamp, "triton": triton.__version__, "target": "sm_90", "experts": experts,
                         "top_k": top_k, "variant": variant, "sampler": kwargs.get("sampler", "floyd"), **facts,
                         "code_kib": code_kib})  # fmt: skip
            print(markdown_row(rows[-1]), flush=True)
    return rows


def markdown_row(row: dict[str, Any]) -> str:
    return (f"| {row['experts']} / {row['top_k']} | {row['variant']} | {row['instructions']:,} | {row['code_kib']} | "
            f"{row['registers']} | {row['shared_bytes']} | {row['stack_bytes']} |")  # fmt: skip


def markdown(rows: list[dict[str, Any]]) -> str:
    version = rows[0]["triton"] if rows else "?"
    head = [f"sm_90 code of each one-launch routing variant at one token (Triton {version}; "
            "`python -m benchmarks.kernels.uniform_route_code`)", "",
            "| experts / top-k | variant | SASS instructions | code KiB | registers | shared bytes | stack bytes |",
            "|---|---|---|---|---|---|---|"]  # fmt: skip
    return "\n".join([*head, *map(markdown_row, rows)]) + "\n"


def main(argv: list[str] | None = None) -> int:
    from benchmarks.kernels.bench_uniform_route import parse_shapes

    ap = argparse.ArgumentParser(prog="python -m benchmarks.kernels.uniform_route_code",
                                 description=__doc__.splitlines()[0])  # fmt: skip
    ap.add_argument("--shapes", default=",".join(f"{e}:{k}" for e, k in SHAPES))
    ap.add_argument("--out", type=Path, default=KERNEL_RESULTS)
    args = ap.parse_args(argv)
    try:
        shapes = parse_shapes(args.shapes)
    except ValueError as exc:
        ap.error(str(exc))
    try:
        rows = count(shapes)
    except (RuntimeError, FileNotFoundError, ImportError) as exc:
        print(f"uniform_route_code: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "cpu_uniform_route_code.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    (args.out / "cpu_uniform_route_code.md").write_text(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
