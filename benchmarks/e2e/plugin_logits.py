"""Our kernel in the engine against vLLM's, end to end: the served plan with and without the plugin, same weights.

    python -m benchmarks.e2e.plugin_logits --model qwen3-30b-a3b-fp8-static --random-layers 4 --out-dir OUT

Starts the plan with option.moe_kernel=vllm (`plan_vllm_kernel`), the plan's server (`plan`, our kernel at the
dispatch table's M) and `plan_vllm_kernel` once more (`plan_vllm_kernel_repeat`) one after the other, each exactly
as `serve` runs it, on the same weights,
and sends the same greedy prompts one at a time (decode at M = 1, where the table sends Qwen3-30B-A3B to our
kernel) with the top-20 logprobs of every generated token. The weights: with `--random-layers N` a random FP8
checkpoint of the model cut to N layers (benchmarks/e2e/random_checkpoint.py: vLLM's `load_format=dummy` rounds
every FP8 weight to 0, so the experts would output 0 on both rows and nothing could differ); a model folder with
safetensors is loaded as it is; a config-only model gets dummy weights (throughput only). Written to
OUT/plugin_logits.csv, one row per prompt and pair (`plugin`: plan against the repeat, both warm starts; `control`:
the first, cold, plan_vllm_kernel against the repeat — how far two identical engines already are apart):
- `agree_tokens`: how many leading greedy tokens the two engines share (reported, not required: one flipped argmax
  changes everything after it);
- `max_abs_dlogprob_first_steps`: over the first `--steps` decode steps, the largest |Δ logprob| of a token both
  top-20 lists hold, the engine-level form of the kernels' difference (the layer-level one is 0.015-0.022 relative,
  benchmarks/results/kernels/h200_fused_moe.csv; tests/entrypoint/moe_plugin/test_plugin_gpu.py bounds it at 0.03);
- `top1_equal_first_steps`: whether the first `--steps` argmaxes agree; `finite`: every logprob of both rows is;
- `decode_steps_compared`, `max_abs_dlogprob_decode`: the same restricted to decode steps (step 0 comes from the
  prefill, where the prompt's length, not M = 1, picks the kernel) while the two contexts are still equal.
On an engine where the plan does not turn the plugin on (the CPU engine, a shape without a table row) the two rows
are the same engine and every difference is 0: tests/benchmarks/test_plugin_logits.py checks the script that way.
tests/entrypoint/moe_plugin/test_plugin_engine_gpu.py runs it on the H200 (`make test-gpu`) and holds it to a bound.
"""

from __future__ import annotations

import argparse
import csv
import http.client
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.e2e import backends as be
from benchmarks.e2e import random_checkpoint, runner, served, spec, tokenizer
from benchmarks.e2e.served_worker import Prompts
from entrypoint.bake_cache import stop_server, wait_ready
from tools.local_server import free_port

# In start order. The first engine compiles (torch.compile, Triton) into the run's shared cache, the next two load
# it: the plugin pair (plan against the repeat) is two warm starts that differ only in the MoE kernel, and the
# control pair (the cold plan_vllm_kernel against its warm repeat) is two engines that differ in nothing but the
# start. Two such engines on the H200 already disagree (2026-12-01, 4-layer random checkpoint: up to 0.82 nats,
# greedy tokens apart within 0-10 tokens; a cold compile against a cache load is one suspect), so the plugin's
# difference is read against the control's, not against 0.
ROWS = ("plan_vllm_kernel", "plan")
REPEAT = "plan_vllm_kernel_repeat"
PAIRS = {"plugin": ("plan", REPEAT), "control": ("plan_vllm_kernel", REPEAT)}
COLUMNS = ("pair", "prompt", "agree_tokens", "tokens", "max_abs_dlogprob_first_steps", "top1_equal_first_steps",
           "finite", "decode_steps_compared", "max_abs_dlogprob_decode", "plugin_on")  # fmt: skip


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
    worst, decode_worst, top1 = 0.0, 0.0, True
    compared = min(steps, agree + 1, len(a["top_logprobs"]))  # a step is comparable while the contexts are equal
    for i in range(compared):
        ta, tb = a["top_logprobs"][i], b["top_logprobs"][i]
        gap = max((abs(ta[t] - tb[t]) for t in set(ta) & set(tb)), default=0.0)
        worst = max(worst, gap)
        if i > 0:  # step 0's logprobs come from the prefill (M = prompt length), the later ones from M = 1 decode
            decode_worst = max(decode_worst, gap)
        top1 = top1 and max(ta, key=ta.get) == max(tb, key=tb.get)
    finite = all(math.isfinite(v) for row in (a, b) for top in row["top_logprobs"] for v in top.values())
    return {"agree_tokens": agree, "tokens": len(a["tokens"]), "max_abs_dlogprob_first_steps": round(worst, 6),
            "top1_equal_first_steps": top1, "finite": finite, "decode_steps_compared": max(0, compared - 1),
            "max_abs_dlogprob_decode": round(decode_worst, 6)}  # fmt: skip


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
            stop_server(server, timeout_s=30)


def model_dir_for(args: argparse.Namespace) -> tuple[Path, str]:
    """The folder the engines load and its load format (see the module doc: random, as it is, or dummy)."""
    if args.random_layers:
        dest = args.work_dir / f"random-{Path(args.model).name}-L{args.random_layers}"
        t0 = time.monotonic()
        model_dir = random_checkpoint.write(args.model, args.random_layers, dest)
        print(f"random checkpoint {model_dir} ({time.monotonic() - t0:.0f} s)", flush=True)
        return model_dir, "auto"
    model_dir = spec.resolve_model_dir(args.model)
    if any(model_dir.glob("*.safetensors")):
        return model_dir, "auto"
    return tokenizer.prepare_model_dir(model_dir, args.work_dir), "dummy"


def engine_environment(work_dir: Path) -> dict[str, str]:
    """os.environ plus caches of this run's own: FlashInfer's JIT modules built once (under the e2e harness's work
    folder they are the ones it built) and one torch.compile/Triton cache both rows share (the MoE layer is vLLM's
    opaque moe_forward op: the compiled graph does not hold the kernel choice)."""
    env = dict(os.environ)
    env.setdefault("FLASHINFER_WORKSPACE_BASE", str(work_dir / "flashinfer"))
    env.setdefault("VLLM_CACHE_ROOT", str(work_dir / "plugin-logits-cache" / "vllm"))
    env.setdefault("TRITON_CACHE_DIR", str(work_dir / "plugin-logits-cache" / "triton"))
    if runner.prewarm_flashinfer(env, timeout_s=300) is None:
        print("FlashInfer JIT modules not prebuilt (no FlashInfer here, or it failed): the engine builds them")
    return env


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a bundled model name (benchmarks/e2e/models) or a model folder")
    ap.add_argument("--out-dir", type=Path, required=True)
    ap.add_argument("--work-dir", type=Path, help="model copies and caches (default OUT/work)")
    ap.add_argument(
        "--random-layers",
        type=int,
        default=0,
        help="load a random FP8 checkpoint of the model cut to this many layers (0: see the module doc)",
    )
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--input-len", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--steps", type=int, default=8, help="decode steps whose logprobs are compared")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.85)
    ap.add_argument("--start-timeout-s", type=float, default=600)
    ap.add_argument("--plan-gpu", default=None, help="gpu= for the plan (e.g. H200); default: the resolver detects it")
    args = ap.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    args.work_dir = args.work_dir or args.out_dir / "work"
    args.work_dir.mkdir(parents=True, exist_ok=True)
    model_dir, load_format = model_dir_for(args)
    config = spec.load_config(model_dir)
    environ = engine_environment(args.work_dir)
    port = free_port()
    options = served.bench_options(
        max_model_len=args.input_len + args.tokens + 16, max_num_seqs=8,
        gpu_memory_utilization=args.gpu_memory_utilization, compile_mode="default", load_format=load_format,
    )  # fmt: skip
    plan = served.served_plan(model_dir, environ, port=port, options=options, gpu=args.plan_gpu)
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
        command = served.row_command(plan, setup, environ, options)
        log = args.out_dir / f"{setup.backend}.log"
        results[setup.backend] = run_row(command, plan.model, port, prompt_ids, args, log)
    control = next(s for s in setups if s.backend == "plan_vllm_kernel")
    print(f"{REPEAT}: the same engine started again (the control)", flush=True)
    command = served.row_command(plan, control, environ, options)
    results[REPEAT] = run_row(command, plan.model, port, prompt_ids, args, args.out_dir / f"{REPEAT}.log")
    plugin_on = plan.env.get(be.KERNEL_ENV) == "project"  # the plugin runs ours only then ("vllm": off)
    rows = [
        {"pair": pair, "prompt": i, **compare(a, b, args.steps), "plugin_on": plugin_on}
        for pair, (left, right) in PAIRS.items()
        for i, (a, b) in enumerate(zip(results[left], results[right], strict=True))
    ]
    with (args.out_dir / "plugin_logits.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    for row in rows:
        print(row)
    print(
        f"wrote {args.out_dir / 'plugin_logits.csv'} ({load_format} weights; plugin "
        f"{'on' if plugin_on else 'off: the rows are one engine'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
