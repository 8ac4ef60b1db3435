"""Our kernel inside the served engine on the H200 (`make test-gpu`, vLLM 0.26): the plan with the plugin against
the same plan with vLLM's kernel (option.moe_kernel=vllm), same random FP8 checkpoint (Qwen3-30B-A3B cut to 4
layers: the shipped table's row, E=128 N=768 K=2048 top-8), greedy prompts sent one at a time so every decode step
runs at M = 1, where the table sends this shape to ops.fused_moe_fp8.

The bound. From the kernel-level error alone: each MoE layer's output differs from vLLM's kernel by ≤ 0.03 relative
(test_plugin_gpu.py; the bench measured 0.015-0.022: two FP8 roundings of the intermediate activation apart). The
checkpoint's logits have std LOGIT_STD = 4 (benchmarks/e2e/random_checkpoint.py); four independent ≤ 3 % layer
errors on the MoE half of each residual update move the final hidden state by ≲ √4 · 0.03 · 0.5 ≈ 3 % in a random
direction, so a logit moves by ≈ 0.12 typically and ≈ 0.4 at 3σ over the 20 tokens compared: KERNEL_BOUND 0.5
nats on any shared top-20 logprob of the first 8 decode steps. But two identical engines on the H200 already
disagree (2026-12-01: up to 0.82 nats, vLLM's kernel on both rows; cause not found yet, see docs/results/e2e.md),
so the run measures that control too (the cold first engine against a warm repeat; the plugin pair is two warm
starts: benchmarks/e2e/plugin_logits.py) and the bound is 2 × the control's worst, at least KERNEL_BOUND, at most
GROSS_BOUND 1.5: a wrong expert, a missing router weight, a scale applied twice or an output left unwritten each
move the MoE half of the update by O(1), i.e. logits by ~2 and more, on every prompt.
Our kernel ran: the plan's engine logs the table row for the shape and the control's engines do not.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest
import torch

from benchmarks.e2e import plugin_logits

pytestmark = pytest.mark.gpu
KERNEL_BOUND = 0.5
GROSS_BOUND = 1.5
LAYERS = 4


def test_the_plugin_in_the_served_engine_matches_vllms_kernel_within_the_bound(tmp_path: Path) -> None:
    if "H200" not in torch.cuda.get_device_name():
        pytest.skip("the shipped dispatch table has rows for the H200 only: elsewhere the plan keeps vLLM's kernel")
    # On the device the session passes its folders: OUT keeps the CSV and the server logs, WORK_DIR the FlashInfer
    # JIT modules the e2e harness builds too.
    # The engines share the GPU with this pytest process, whose earlier GPU tests left tensors in torch's cache
    # (21 GB seen): vLLM checks free memory against its utilisation target at start.
    torch.cuda.empty_cache()
    out = Path(os.environ.get("PLUGIN_LOGITS_OUT", tmp_path / "out"))
    work = Path(os.environ.get("WORK_DIR", tmp_path / "work"))
    rc = plugin_logits.main([
        "--model", "qwen3-30b-a3b-fp8-static", "--random-layers", str(LAYERS), "--out-dir", str(out),
        "--work-dir", str(work), "--prompts", "4", "--tokens", "128", "--steps", "8",
        "--plan-gpu", "H200",  # the GPU CUDA reports (checked above): the resolver's NVML detection is tested apart
        "--gpu-memory-utilization", "0.5",  # a 4-layer model; the rest stays free for this process's own context
    ])  # fmt: skip
    assert rc == 0
    row_line = "moe_kernel=project: E=128,N=768,K=2048,top_k=8,tensor-static,NVIDIA_H200: ops.fused_moe_fp8 at M=1"
    assert row_line in (out / "plan.log").read_text(errors="replace"), "the plan's engine did not take our kernel's row"
    for control in ("plan_vllm_kernel", "plan_vllm_kernel_repeat"):
        assert "ops.fused_moe_fp8 at" not in (out / f"{control}.log").read_text(errors="replace"), control
    rows = list(csv.DictReader((out / "plugin_logits.csv").open()))
    assert len(rows) == 8 and all(r["plugin_on"] == "True" and r["finite"] == "True" for r in rows), rows
    worst = {pair: max(float(r["max_abs_dlogprob_first_steps"]) for r in rows if r["pair"] == pair)
             for pair in ("plugin", "control")}  # fmt: skip
    bound = min(GROSS_BOUND, max(KERNEL_BOUND, 2 * worst["control"]))
    print(
        f"max |Δ logprob| over the first 8 steps: plugin {worst['plugin']}, control {worst['control']}; bound {bound}"
    )
    assert worst["plugin"] <= bound, f"plugin {worst['plugin']} > {bound} (control {worst['control']}): {rows}"
