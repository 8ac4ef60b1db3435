"""Our kernel inside the served engine on the H200 (`make test-gpu`; passed with vLLM 0.26, not yet run with the
image's 0.32, where the row line below also shows that 0.32 configures logging before it loads the plugin): the plan
with the plugin against the same plan with vLLM's kernel (option.moe_kernel=vllm), same random FP8 checkpoint
(Qwen3-30B-A3B cut to 4 layers: the shipped table's row, E=128 N=768 K=2048 top-8), greedy prompts sent one at a
time so every decode step runs at M = 1, where the table sends this shape to ops.fused_moe_fp8. Only decode steps
count (step 0's logprobs come from the prefill at M = 64, vLLM's kernel on both rows), and only while the two greedy
contexts are equal.

The bound. Correct kernels differ by 1.5-2.2 % per MoE layer on this shape (the layer bench;
test_plugin_gpu.py allows 3 %). A float32 model of this checkpoint (`python -m benchmarks.e2e.logprob_sensitivity`,
2026-12-01) puts a 1-3 % random error in every MoE output at a worst |Δ logprob| over shared top-20 tokens of
0.05-1.08 nats (about 1 nat whenever a router's top-8 flips in a later layer), and the gross faults far above:
output zeroed 2.67, doubled 3.09, first expert wrong 3.46. Two identical engines on the H200 also disagree (up to
0.82 nats seen, 2026-12-01; cause not established, docs/results/our-kernel.md), so a control pair is measured too (the
cold first engine against a warm repeat; the plugin pair is two warm starts: benchmarks/e2e/plugin_logits.py).
Bound: 2 × the control's worst, at least KERNEL_BOUND 1.5 (above what correct kernels gave), at most GROSS_BOUND
2.0 (below every gross fault). Our kernel ran: the plan's engine logs the table row for the shape and the control
engines do not. Not vacuous: at least MIN_DECODE_STEPS decode steps must have been compared on the plugin pair.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest
import torch

from benchmarks.e2e import plugin_logits

pytestmark = pytest.mark.gpu
KERNEL_BOUND = 1.5
GROSS_BOUND = 2.0
MIN_DECODE_STEPS = 8
LAYERS = 4
PROMPTS = 8


def test_the_plugin_in_the_served_engine_matches_vllms_kernel_within_the_bound(tmp_path: Path) -> None:
    if "H200" not in torch.cuda.get_device_name():
        pytest.skip("the shipped dispatch table has rows for the H200 only: elsewhere the plan keeps vLLM's kernel")
    # The engines share the GPU with this pytest process, whose earlier GPU tests left tensors in torch's cache
    # (21 GB seen): vLLM checks free memory against its utilisation target at start.
    torch.cuda.empty_cache()
    # On the device the session passes its folders: OUT keeps the CSV and the server logs, WORK_DIR the FlashInfer
    # JIT modules the e2e harness builds too.
    out = Path(os.environ.get("PLUGIN_LOGITS_OUT", tmp_path / "out"))
    work = Path(os.environ.get("WORK_DIR", tmp_path / "work"))
    rc = plugin_logits.main([
        "--model", "qwen3-30b-a3b-fp8-static", "--random-layers", str(LAYERS), "--out-dir", str(out),
        "--work-dir", str(work), "--prompts", str(PROMPTS), "--tokens", "64", "--steps", "8",
        "--plan-gpu", "H200",  # the GPU CUDA reports (checked above): the resolver's NVML detection is tested apart
        "--gpu-memory-utilization", "0.5",  # a 4-layer model; the rest stays free for this process's own context
    ])  # fmt: skip
    assert rc == 0
    rows = list(csv.DictReader((out / "plugin_logits.csv").open()))
    assert len(rows) == 2 * PROMPTS and all(r["plugin_on"] == "True" for r in rows), "the plan turned no plugin on"
    assert all(r["finite"] == "True" for r in rows), rows
    row_line = "moe_kernel=project: E=128,N=768,K=2048,top_k=8,tensor-static,NVIDIA_H200: ops.fused_moe_fp8 at M=1"
    assert row_line in (out / "plan.log").read_text(errors="replace"), "the plan's engine did not take our kernel's row"
    for control in ("plan_vllm_kernel", "plan_vllm_kernel_repeat"):
        assert "ops.fused_moe_fp8 at" not in (out / f"{control}.log").read_text(errors="replace"), control
    plugin = [r for r in rows if r["pair"] == "plugin"]
    steps = sum(int(r["decode_steps_compared"]) for r in plugin)
    assert steps >= MIN_DECODE_STEPS, f"only {steps} decode steps were comparable (greedy tokens parted at once)"
    worst = {pair: max(float(r["max_abs_dlogprob_decode"]) for r in rows if r["pair"] == pair)
             for pair in ("plugin", "control")}  # fmt: skip
    bound = min(GROSS_BOUND, max(KERNEL_BOUND, 2 * worst["control"]))
    print(
        f"max |Δ logprob| over decode steps: plugin {worst['plugin']} ({steps} steps), control {worst['control']}; "
        f"bound {bound}"
    )
    assert worst["plugin"] <= bound, f"plugin {worst['plugin']} > {bound} (control {worst['control']}): {rows}"
