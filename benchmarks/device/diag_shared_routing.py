"""Our fused-MoE kernel when the tokens of a batch share experts, against uniform routing (H200, no vLLM needed).

Why: with ours at M = 8 (1.08x faster than vLLM's kernel in the layer bench, uniform routing) the served Qwen3 engine
lost 22 % at concurrency 8 (2026-12-01c), where vLLM's kernel cost little more than at concurrency 1. The suspected
mechanism: vLLM groups a batch by expert and reads each touched expert once, our PAIR mode streams an expert's
weights once per (token, expert) pair, so sharing should save ours much less than vLLM's (measured 2026-12-01c: ours
saves 12-26 %, benchmarks/results/kernels/RUNS.md). benchmarks.kernels.dispatch_table's rule (an M above 1 must also
beat vLLM's M = 1 time) rests on that.

    PYTHONPATH=$PWD python3 -m benchmarks.device.diag_shared_routing [--out DIR]

Per shape and M: µs per call of ops.fused_moe_fp8 (default config) with uniform and with shared routings, timed like
bench_fused_moe (tools.measure.graph_us over rotating routings so weights stream from HBM), and the distinct experts.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from tools import moe_harness
from tools.measure import graph_us, run_preamble

SHAPES = ("qwen3-30b-a3b:tp1", "llama-4-maverick:tp8", "nemotron-3-nano-30b-a3b:tp1")
MS = (1, 2, 4, 8)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    args = ap.parse_args(argv)
    from kernels.shapes import shape_by_key
    from ops.fused_moe_fp8 import fused_moe_fp8

    results = {"preamble": run_preamble(("torch", "triton")), "rows": []}
    for key in SHAPES:
        s = shape_by_key(key)
        problem = moe_harness.PlainMoEProblem(s)
        act = "silu" if s.model.gated else "relu2"
        for m in MS:
            row = {"shape": key, "M": m}
            for routing in ("uniform", "shared"):
                shared = routing == "shared"
                batch = problem.inputs(m, moe_harness.rotations(s, m, shared), shared=shared)

                def run(batch=batch, problem=problem, act=act):
                    for x, w, ids in batch:
                        fused_moe_fp8(x, problem.w1, problem.w2, w, ids, **problem.scales, activation=act)

                row[f"{routing}_us"] = round(graph_us(run, calls=len(batch)), 2)
                row[f"{routing}_distinct_experts"] = moe_harness.distinct_experts(batch)
            print(json.dumps(row), flush=True)
            results["rows"].append(row)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "diag_shared_routing.json").write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
