"""Our kernel in the engine against vLLM's, end to end: the served plan with and without the plugin, same weights.

    python -m benchmarks.e2e.plugin_logits --model qwen3-30b-a3b-fp8-static --out-dir OUT [--tokens 256]

Starts the plan's server (`plan`, our kernel at the dispatch table's M) and the same plan with
option.moe_kernel=vllm (`plan_vllm_kernel`) one after the other, each exactly as `serve` runs it, on random weights
(`load_format=dummy`: vLLM seeds them, so both engines hold the same weights), and sends the same greedy prompts with
the top-20 logprobs of every generated token. Written to OUT/plugin_logits.csv, one row per prompt:
- `agree_tokens`: how many leading greedy tokens the two engines share (reported, not required: one flipped argmax
  changes everything after it);
- `max_abs_dlogprob_first_steps`: over the first `--steps` decode steps, the largest |Δ logprob| of a token both
  top-20 lists hold, the engine-level form of the kernels' difference (the layer-level one is 0.015-0.022 relative,
  benchmarks/results/kernels/h200_fused_moe.csv; tests/entrypoint/moe_plugin/test_plugin_gpu.py bounds it at 0.03);
- `top1_equal_first_steps`: whether the first `--steps` argmaxes agree.
On an engine where the plan does not turn the plugin on (the CPU engine, a shape without a table row) the two rows
are the same engine and every difference is 0: tests/benchmarks/test_plugin_logits.py checks the script that way.
"""

from __future__ import annotations

import argparse
import csv
import http.client
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.e2e import backends as be
from benchmarks.e2e import served, spec
from benchmarks.e2e.served_worker import Prompts, stop, wait_ready
from tools.local_server import free_port

ROWS = ("plan", "plan_vllm_kernel")
COLUMNS = ("prompt", "agree_tokens", "tokens", "max_abs_dlogprob_first_steps", "top1_equal_first_steps", "plugin_on")


def generate(port: int, model: str, prompts: list[list[int]], tokens: int, top: int) -> list[dict[str, Any]]:
    """Greedy completions with the top logprobs of each generated token, one request per prompt."""
    out = []
    for ids in prompts:
        body = {"model": model, "prompt": ids, "max_tokens": tokens, "min_tokens": tokens, "ignore_eos": True,
                "temperature": 0.0, "logprobs": top}  # fmt: skip
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        payload = json.loads(response.read())
        if response.status != 200:
            raise RuntimeError(f"/v1/completions answered {response.status}: {str(payload)[:300]}")
        out.append(payload["choices"][0]["logprobs"])
    return out


def compare(a: dict[str, Any], b: dict[str, Any], steps: int) -> dict[str, Any]:
    agree = 0
    for x, y in zip(a["tokens"], b["tokens"], strict=False):
        if x != y:
            break
        agree += 1
    worst, top1 = 0.0, True
    for i in range(min(steps, agree + 1, len(a["top_logprobs"]))):
        ta, tb = a["top_logprobs"][i], b["top_logprobs"][i]
        shared = set(ta) & set(tb)
        worst = max([worst, *(abs(ta[t] - tb[t]) for t in shared)])
        top1 = top1 and max(ta, key=ta.get) == max(tb, key=tb.get)
    return {"agree_tokens": agree, "tokens": len(a["tokens"]), "max_abs_dlogprob_first_steps": round(worst, 6),
            "top1_equal_first_steps": top1}  # fmt: skip


def run_row(
    command: served.ServedCommand, model: str, port: int, prompts: list[list[int]], args: argparse.Namespace, log: Path
) -> list[dict[str, Any]]:
    with log.open("w") as out:
        server = subprocess.Popen(command.argv, env=command.env, stdout=out, stderr=subprocess.STDOUT)
        try:
            seconds = wait_ready(server, port, time.time() + args.start_timeout_s)
            print(f"  ready in {seconds:.0f} s; {len(prompts)} prompts x {args.tokens} tokens", flush=True)
            return generate(port, model, prompts, args.tokens, args.top)
        finally:
            stop(server)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a bundled model name (benchmarks/e2e/models) or a model folder")
    ap.add_argument("--out-dir", type=Path, required=True)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--input-len", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--steps", type=int, default=8, help="decode steps whose logprobs are compared")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.85)
    ap.add_argument("--start-timeout-s", type=float, default=600)
    args = ap.parse_args(argv)
    model_dir = spec.resolve_model_dir(args.model)
    config = spec.load_config(model_dir)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    options = served.bench_options(
        max_model_len=args.input_len + args.tokens + 16, max_num_seqs=8,
        gpu_memory_utilization=args.gpu_memory_utilization, compile_mode="default",
    )  # fmt: skip
    plan = served.served_plan(model_dir, os.environ, port=port, options=options)
    decision = be.PlanDecision(plan.moe_backend.value, dict(plan.env), "resolver, served options")
    setups = be.engine_setups(list(ROWS), model_dir, spec.moe_shape(config), lambda _dir: decision)
    vocab = int(config.get("vocab_size") or config.get("text_config", {}).get("vocab_size", 32000))
    prompt_ids = [Prompts(vocab, seed=1234 + i).ids(args.input_len) for i in range(args.prompts)]
    results: dict[str, list[dict[str, Any]]] = {}
    for setup in setups:
        if setup.same_engine_as:
            print(f"{setup.backend}: the same engine as {setup.same_engine_as} (the plan runs no plugin here)")
            results[setup.backend] = results[setup.same_engine_as]
            continue
        print(f"{setup.backend}: {setup.note}", flush=True)
        command = served.row_command(plan, setup, dict(os.environ), options)
        log = args.out_dir / f"{setup.backend}.log"
        results[setup.backend] = run_row(command, plan.model, port, prompt_ids, args, log)
    plugin_on = be.KERNEL_ENV in plan.env
    rows = [
        {"prompt": i, **compare(a, b, args.steps), "plugin_on": plugin_on}
        for i, (a, b) in enumerate(zip(results["plan"], results["plan_vllm_kernel"], strict=True))
    ]
    with (args.out_dir / "plugin_logits.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    for row in rows:
        print(row)
    print(
        f"wrote {args.out_dir / 'plugin_logits.csv'} (plugin {'on' if plugin_on else 'off: the rows are one engine'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
