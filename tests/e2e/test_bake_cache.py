"""`python -m entrypoint bake-cache` on the real CPU engine: the plan's server starts, takes every batch of the
bake's traffic, stops, and leaves a layer whose key is exactly what `serve` of the same inputs computes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from entrypoint.caches import compile_layer
from entrypoint.inputs.gather import build_plan
from entrypoint.resolve.cpu_engine import CPU_MAX_SAMPLED_BATCH
from entrypoint.warmup import traffic
from tools.local_server import CPU_ENV, REPO


def bake(model: Path, out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **CPU_ENV, "PYTHONUNBUFFERED": "1"}
    argv = [
        sys.executable,
        "-m",
        "entrypoint",
        "bake-cache",
        "--model",
        str(model),
        "--out",
        str(out),
        "--timeout",
        "240",
    ]
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def test_bake_cache_serves_every_batch_and_writes_a_layer_serve_accepts(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "layer"
    run = bake(tiny_model, out)
    assert run.returncode == 0, run.stderr[-4000:]
    manifest = json.loads((out / compile_layer.MANIFEST).read_text())
    serve_plan = build_plan(model=str(tiny_model), environ={**os.environ, **CPU_ENV})
    # max_model_len 512 from the argv; max_num_seqs: the logged default
    vocab, max_len, max_seqs = traffic.model_limits(serve_plan.model, serve_plan.vllm_args, "bake-cache")
    assert max_len == 512 and f"max_num_seqs = {max_seqs} (auto: " in run.stderr
    sent = traffic.batches("m", vocab, max_len, max_seqs, CPU_MAX_SAMPLED_BATCH)
    assert manifest["bake_requests"] == sum(len(b.bodies) for b in sent)  # every request answered 200
    assert "seeded batches capped at 8 (auto: " in run.stderr  # the CPU engine's decision, with its reason
    # what serve plans for the same model (listening on 0.0.0.0:8080) has the layer's key: serve would seed it
    assert manifest["key"] == compile_layer.key_for(serve_plan).__dict__
    env = {**compile_layer.cache_env(tmp_path / "run"), compile_layer.LAYER_ENV: str(out)}
    assert compile_layer.seed(serve_plan, env).startswith("compile cache: seeded ")
    # the server is gone, and a second bake into the same folder is refused before anything starts
    again = bake(tiny_model, out)
    finished = f"{out / compile_layer.MANIFEST} exists already (a finished layer). Accepted: an empty or new folder"
    assert again.returncode == 2 and finished in again.stderr
    # the CPU engine has no Triton MoE tiles: the bake says so and goes on (issue 32's tune runs on GPU plans only)
    assert "tune: skipped: the CPU engine runs no Triton MoE tiles" in run.stderr
