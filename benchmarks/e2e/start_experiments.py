"""The start experiments of a plan row: its start from warm, copied and baked caches (start_breakdown), and from the
compile-cache layer that `make cache-layer` bakes into the image, alternated with warm starts (--layer-start,
--start-pairs). One row per start in start_breakdown.csv, written as each start ends."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.e2e import one_engine, report, run_args, runner, served, start_rows, tokenizer
from benchmarks.e2e.jitcount import moe_kernels_by_rank
from benchmarks.e2e.jobs import PlannedJob, max_model_len, served_options
from benchmarks.e2e.logparse import condense
from benchmarks.e2e.run_args import RunArgs
from tools.local_server import free_port


def start_breakdown(
    args: RunArgs,
    j: PlannedJob,
    run_dir: Path,
    cache: Path,
    cold: runner.JobResult,
    budget: runner.Budget,
    engines_log: Path,
) -> None:
    """The served start from: empty caches (the cold run), the same caches again (warm), those caches copied to
    a new path (can a cache made elsewhere be baked into an image?), and today's image (empty caches plus the
    baked Triton cache). One row each in start_breakdown.csv. The baked start also sends one short batch per workload
    shape and counts what that compiled, per rank: the check that the baked cache serves every rank after start."""
    # how the engine was sized belongs to a start's row: CUDA graphs, compiled shapes and the warm-up follow it
    sizing = f"max_num_seqs={args.max_num_seqs} max_model_len={max_model_len(args) or 'checkpoint'}"
    facts = {"split": j.split, "options": f"{j.options}; {sizing}" if j.options else sizing}
    csv_path = args.out_dir / "start_breakdown.csv"

    def keep(row: dict[str, Any]) -> None:
        # each start's row is written as it ends: a device machine lost mid-breakdown (2026-12-02b, twice) still
        # returns the starts that finished before the last collect
        start_rows.append_start_rows([{**row, **facts}], csv_path)
        start_rows.plot_start_breakdown(start_rows.read_start_rows(csv_path), args.out_dir / "start_breakdown.png")

    keep(start_rows.start_row(j.model, j.setup.backend, "empty", cold, args.compile_mode))
    copied = cache.with_name(cache.name + "-copied")
    if copied.exists():
        shutil.rmtree(copied)
    if "copied" in args.starts.modes:
        shutil.copytree(cache, copied, symlinks=True)
    baked = cache.with_name(cache.name + "-baked")
    runner.reset_cache(baked)
    spawn = {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}
    modes = [("warm", cache, {}), ("warm-spawn", cache, spawn), ("copied", copied, {})]
    if args.starts.baked_cache is not None:
        image_env = {"TRITON_CACHE_MANAGER": "kernels.triton_cache:BakedFirstCacheManager",
                     "MOE_BAKED_TRITON_CACHE": str(args.starts.baked_cache)}  # fmt: skip
        modes.append(("baked", baked, image_env))
    modes = [m for m in modes if m[0] in args.starts.modes]
    warm_s: float | None = None
    for mode, where, extra in modes:
        if not budget.allows(runner.estimate_start_s(j.model, j.setup, served=True) + 30):
            print(f"e2e: {j.model} {j.setup.backend}: start breakdown stops before {mode}: budget")
            break
        env = one_engine.engine_env(args, j, where, extra)
        timeout = max(30.0, min(run_args.job_timeout(args, j.model, j.setup.backend), budget.left() - 10))
        if mode == "warm-spawn" and warm_s:
            timeout = min(timeout, 2 * warm_s + 30)  # a comparison row: a slow start must not eat the layer's
        probe = mode == "baked"
        result = one_engine.serve(args, j, run_dir, env, where, timeout, mode, True, None, engines_log, jit_probe=probe)
        keep(start_rows.start_row(j.model, j.setup.backend, mode, result, args.compile_mode))
        warm_s = result.start_s if mode == "warm" else warm_s
        jit = report.jit_events(result)
        print(f"e2e: {j.model} {j.setup.backend}: start from {mode}: {result.start_s} s; fused-MoE JIT per rank at "
              f"start {moe_kernels_by_rank(jit['jit_at_start_by_rank'], jit['rank_cache_dirs']) or '-'}"
              + (f", after start {moe_kernels_by_rank(jit['jit_while_serving_by_rank'], jit['rank_cache_dirs'])}"
                 if probe else ""))  # fmt: skip
    if args.starts.layer_start and j.setup.backend == "plan":
        # the bake is one cold start plus its traffic, the layer start about a warm one (0.6 of a cold one is
        # generous: 0.5 on the H200); the cold start just measured is the better guess when there is one
        cold_s = cold.start_s or runner.estimate_start_s(j.model, j.setup, served=True)
        need = 1.6 * cold_s + 60
        if not budget.allows(need):
            print(f"e2e: {j.model} plan: layer start skipped: {budget.left():.0f} s of budget left < ~{need:.0f} s")
            return
        row, layer = _layer_start(args, j, run_dir, cache, budget, engines_log)
        keep(row)
        # The same machine's starts differ by more than the goal's margin (2026-12-03c: two warm starts 48 and 57 s,
        # the layer 72 s): alternate more of each, so the ratio is read against their spread.
        pairs = args.starts.pairs if layer is not None else 0  # no layer, nothing to pair
        for k in range(2, pairs + 2):
            if not budget.allows(2 * (warm_s or cold_s) + 60):
                print(f"e2e: {j.model} plan: start pairs stop before pair {k}: budget")
                break
            env = one_engine.engine_env(args, j, cache, {})
            timeout = max(30.0, min(run_args.job_timeout(args, j.model, j.setup.backend), budget.left() / 2))
            result = one_engine.serve(args, j, run_dir, env, cache, timeout, f"warm-{k}", True, None, engines_log)
            keep(start_rows.start_row(j.model, j.setup.backend, f"warm {k}", result, args.compile_mode))
            keep(_start_from_layer(args, j, run_dir, cache, layer, budget, engines_log, k))
            print(f"e2e: {j.model} plan: pair {k}: warm {result.start_s} s, then the layer (start_breakdown.csv)")


def _layer_start(
    args: RunArgs, j: PlannedJob, run_dir: Path, cache: Path, budget: runner.Budget, engines_log: Path
) -> tuple[dict[str, Any], Path | None]:
    """The image with its compile-cache layer (`make cache-layer`): `python -m entrypoint bake-cache` here with the
    row's options, then a start from empty caches seeded from that layer as `serve` seeds them
    (entrypoint.caches.compile_layer.seed), probed with every workload shape and seeded top-p batches; its row counts
    what still compiled at start and after. Returns the row and the layer (None when the bake failed)."""
    model_dir = tokenizer.prepare_model_dir(run_dir, args.work_dir)
    layer = cache.with_name(cache.name + "-layer")
    shutil.rmtree(layer, ignore_errors=True)
    options = {"MOE_SERVING_DEFAULT_PROPERTIES": str(served.IMAGE_DEFAULT_PROPERTIES), **served_options(args)}
    # the image's environment (its baked model-info entries included); bake-cache points the caches at `layer` itself
    env = {**one_engine.engine_env(args, j, layer.with_name(layer.name + "-unused"), {}), **options}
    timeout = max(60.0, min(run_args.job_timeout(args, j.model, j.setup.backend) + 300, budget.left() / 2))
    log = args.work_dir / f"{j.model}.plan.bake-cache.log"
    argv = [sys.executable, "-m", "entrypoint", "bake-cache", "--model", str(model_dir), "--out", str(layer),
            "--timeout", str(int(timeout))]  # fmt: skip
    t0 = time.perf_counter()
    with log.open("w") as out:
        # its own process group: a bake cut at the timeout must not leave its vLLM server holding the GPU
        bake = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = bake.wait(timeout=timeout + 120)
        except subprocess.TimeoutExpired:
            os.killpg(bake.pid, signal.SIGTERM)
            try:
                bake.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(bake.pid, signal.SIGKILL)
                bake.wait()
            code = -1
    with engines_log.open("a") as f:
        f.write(f"\n===== {j.model}.plan.bake-cache: rc {code} after {time.perf_counter() - t0:.0f} s =====\n")
        f.write(condense(log.read_text(errors="replace")))
    if code != 0:
        print(f"e2e: {j.model} plan: bake-cache failed (rc {code}, {log})")
        failed = runner.JobResult(status="failed", error=f"bake-cache rc {code}")
        return start_rows.start_row(j.model, j.setup.backend, "layer", failed, args.compile_mode), None
    print(f"e2e: {j.model} plan: bake-cache {time.perf_counter() - t0:.0f} s")
    return _start_from_layer(args, j, run_dir, cache, layer, budget, engines_log, 1), layer


def _start_from_layer(
    args: RunArgs,
    j: PlannedJob,
    run_dir: Path,
    cache: Path,
    layer: Path,
    budget: runner.Budget,
    engines_log: Path,
    pair: int,
) -> dict[str, Any]:
    """One start from empty caches seeded from `layer`, as `serve` seeds them. The first (pair 1) is probed with
    every workload shape and seeded top-p batches and counts what compiled after start; later ones time the start."""
    from entrypoint.caches import compile_layer
    from entrypoint.resolve.cpu_engine import CPU_MAX_SAMPLED_BATCH

    mode = "layer" if pair == 1 else f"layer {pair}"
    model_dir = tokenizer.prepare_model_dir(run_dir, args.work_dir)
    where = cache.with_name(cache.name + "-from-layer")
    runner.reset_cache(where)
    env = one_engine.engine_env(args, j, where, {compile_layer.LAYER_ENV: str(layer)})
    # the plan serve resolves here (GPU detected, as the bake detected it), and the one line serve logs
    plan = served.served_plan(model_dir, env, port=free_port(), options=served_options(args))
    seeded = compile_layer.seed(plan, env)
    print(f"e2e: {j.model} plan: {mode}: {seeded}")
    if not seeded.startswith("compile cache: seeded "):
        failed = runner.JobResult(status="failed", error=seeded)
        return start_rows.start_row(j.model, j.setup.backend, mode, failed, args.compile_mode)
    timeout = max(30.0, min(run_args.job_timeout(args, j.model, j.setup.backend), budget.left() - 10))
    probed = pair == 1
    # seeded batches of 8 and 16 (the CPU engine: 8 only, CPU_MAX_SAMPLED_BATCH)
    sizes = ((CPU_MAX_SAMPLED_BATCH,) if plan.gpu.kind == "cpu" else (8, 16)) if probed else ()
    # the server of this row runs exactly the plan seeded above: the GPU detected, as serve and the bake detect it
    result = one_engine.serve(args, j, run_dir, env, where, timeout, mode.replace(" ", "-"), True, None, engines_log,
                     jit_probe=probed, sampler_probe=sizes, detect_gpu=True)  # fmt: skip
    jit = report.jit_events(result)
    probe = next((e for e in result.events if e.get("event") == "serving_compiles"), {})
    after = sum((jit.get("jit_while_serving") or {}).values()) if probe else "not probed"
    print(f"e2e: {j.model} plan: start from the layer ({mode}): {result.status}, {result.start_s} s; Triton "
          f"compiles at start {sum((jit.get('jit_at_start') or {}).values())}, while probed {after} "
          f"({probe.get('jit_probe_requests_ok', 0)} probe requests answered)")  # fmt: skip
    return start_rows.start_row(j.model, j.setup.backend, mode, result, args.compile_mode)
