"""`python -m entrypoint bake-cache --out DIR`: one start of what `serve` runs, its traffic, and the caches it made.

Runs the plan `serve` would exec (same resolver, argv and environment; on 127.0.0.1 and a free port) with its cache
variables pointing into DIR, waits for /health, sends entrypoint.warmup.traffic's requests, stops the server and writes
DIR/manifest.json (what the layer was made for: entrypoint.caches.compile_layer). On a GPU host with the image this is
`make cache-layer`; docs/image.md has the steps.
"""

from __future__ import annotations

import argparse
import http.client
import json
import logging
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from entrypoint.caches import compile_layer, model_info, tune_layer
from entrypoint.resolve.cpu_engine import CPU_MAX_SAMPLED_BATCH, SEEDED_CHUNK_CRASH
from entrypoint.resolve.layer_files import LAYER_ENV
from entrypoint.resolve.plan import Plan
from entrypoint.serve import fetch_if_remote, plan_log_lines, vllm_command, vllm_environment
from entrypoint.utils.argv import flag_value
from entrypoint.utils.errors import ConfigError
from entrypoint.utils.ports import free_port
from entrypoint.warmup import WARMUP_ENV, traffic

log = logging.getLogger("entrypoint.bake_cache")
LOCAL_HOST = "127.0.0.1"


def bake_plan(model: str | None, properties: Path | None, layer: Path | None = None, gpu: str | None = None) -> Plan:
    """What `serve` would run for these inputs, listening on 127.0.0.1 and a free port (where it listens is not part
    of what compiles: compile_layer.plan_digest leaves it out). With ``layer``, the plan reads that layer's tuned
    files as a start from the finished image will (entrypoint.resolve.layer_files)."""
    from entrypoint.inputs.gather import build_plan

    environ = {**os.environ, LAYER_ENV: str(layer)} if layer is not None else None
    return build_plan(
        model=model, properties=properties, host=LOCAL_HOST, port=free_port(LOCAL_HOST), environ=environ, gpu=gpu
    )


def tune_step(
    args: argparse.Namespace, where: str, command: str, gpu: str | None = None
) -> tuple[Plan, tune_layer.TuneOutcome | None]:
    """The plan `serve` would run, and the tune of it on this GPU into args.out (entrypoint.caches.tune_layer), as
    `tune` runs it alone and `bake-cache` before its server; refuses (exit 2) where tuning needs a GPU it lacks."""
    from kernels.tuning.gpu import gpu_visible

    tune_layer.require_gpu(args.tune, tune_layer.flavour(), gpu_visible(), where)
    plan = bake_plan(args.model, args.properties, gpu=gpu)
    args.out.mkdir(parents=True, exist_ok=True)
    return plan, tune_layer.tune_for_plan(plan, args.out, args.tune, args.tune_budget_s, command)


def tune_then_plan(args: argparse.Namespace, command: str) -> Plan:
    """`bake-cache`'s first step: the tune, then the plan that reads the tuned files, so the bake compiles the tiles
    and kernels a start from the layer will run."""
    plan, outcome = tune_step(args, "bake-cache", command)
    return bake_plan(args.model, args.properties, layer=args.out) if outcome and outcome.written else plan


def health(port: int) -> int | None:
    """The status of GET /health on 127.0.0.1:port; None while nothing answers."""
    try:
        conn = http.client.HTTPConnection(LOCAL_HOST, port, timeout=2)
        conn.request("GET", "/health")
        return conn.getresponse().status
    except OSError:
        return None


class ServerNotReady(RuntimeError):
    """The server exited, or its /health did not answer 200 by the deadline."""


def wait_ready(server: subprocess.Popen[bytes], port: int, deadline: float, poll_s: float = 0.25) -> float:
    """Seconds until GET 127.0.0.1:port/health answers 200; `deadline` is a time.time() value."""
    t0 = time.perf_counter()
    while health(port) != 200:
        if server.poll() is not None:
            raise ServerNotReady(f"the server exited with {server.returncode} before /health answered 200")
        if time.time() > deadline:
            raise ServerNotReady(f"no /health 200 within {time.perf_counter() - t0:.0f} s")
        time.sleep(poll_s)
    return time.perf_counter() - t0


def _served_model(port: int) -> str:
    conn = http.client.HTTPConnection(LOCAL_HOST, port, timeout=10)
    conn.request("GET", "/v1/models")
    return str(json.loads(conn.getresponse().read())["data"][0]["id"])


class BakeFailed(RuntimeError):
    """The bake's server died, never answered, or was stopped: no layer is written."""


class _Terminated(BakeFailed):
    """SIGTERM while baking: unwinds through `finally`, so the server started here is stopped too."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise _Terminated(f"bake-cache: signal {signum}")


def stop_server(server: subprocess.Popen[bytes], timeout_s: float = 60) -> int:
    """SIGTERM (vLLM shuts down cleanly), then SIGKILL after timeout_s; the exit status."""
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return server.returncode


def bake(plan: Plan, out: Path, timeout_s: float) -> dict:
    """Start, warm, stop; returns the manifest. The caches go to out/{vllm,torchinductor,triton}."""
    if (out / compile_layer.MANIFEST).exists():
        reason = f"{out / compile_layer.MANIFEST} exists already (a finished layer)"
        raise ConfigError("bake-cache --out", str(out), reason, "an empty or new folder, or an unfinished bake's")
    for name in compile_layer.CACHE_DIRS:
        if (out / name).is_file():
            raise ConfigError("bake-cache --out", str(out), f"{out / name} is a file", "an empty or new folder")
        if (out / name).is_dir() and any((out / name).iterdir()):
            # no manifest: a bake that was stopped; its caches are partial, the tune's files and state stay
            log.info("bake-cache: removing %s, left by an unfinished bake (no %s)", out / name, compile_layer.MANIFEST)
            shutil.rmtree(out / name)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        reason = f"cannot be made ({err.strerror})"
        raise ConfigError("bake-cache --out", str(out), reason, "an empty or new folder") from None
    plan = fetch_if_remote(plan, os.environ)
    port = int(flag_value(plan.vllm_args, "--port") or 0)
    if flag_value(plan.vllm_args, "--host") != LOCAL_HOST or not port:
        raise ValueError(f"a bake's plan listens on {LOCAL_HOST} and a port: build it with bake_plan()")
    argv = vllm_command(plan)
    # the bake's own traffic is the warm-up's: a server warming itself first would send it twice
    env = {**vllm_environment(plan, os.environ), **compile_layer.cache_env(out), WARMUP_ENV: "off"}
    for line in plan_log_lines(plan):
        log.info("%s", line)
    # as serve does before its exec: the bake's vLLM skips its model-inspection subprocess (20 s on the H200,
    # 2026-12-03c), and the layer then carries every baked entry, so a start from it copies none
    log.info("%s", model_info.seed(env))
    log.info("bake-cache: starting the plan's server on %s:%d, caches under %s", LOCAL_HOST, port, out)
    t0 = time.perf_counter()
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    server = subprocess.Popen(argv, env=env)
    try:
        try:
            wait_ready(server, port, time.time() + timeout_s, poll_s=0.5)
        except ServerNotReady as err:
            raise BakeFailed(str(err)) from None
        log.info("bake-cache: server up after %.0f s; sending the bake's requests", time.perf_counter() - t0)
        vocab, max_len, max_seqs = traffic.model_limits(plan.model, plan.vllm_args, "bake-cache")
        sampled_cap = None
        if plan.gpu.kind == "cpu":
            sampled_cap = CPU_MAX_SAMPLED_BATCH
            log.info("bake-cache: seeded batches capped at %d (auto: %s)", sampled_cap, SEEDED_CHUNK_CRASH)
        batches = traffic.batches(_served_model(port), vocab, max_len, max_seqs, sampled_cap)
        answered = traffic.send(port, batches)
    finally:
        stop_server(server)
        signal.signal(signal.SIGTERM, previous)
    if answered == 0:
        raise BakeFailed("the server answered none of the bake's requests: no layer written")
    manifest = compile_layer.write_manifest(out, plan, answered, time.perf_counter() - t0)
    log.info("bake-cache: %d requests in %d batches; wrote %s (%s)", answered, len(batches),
             out / compile_layer.MANIFEST, json.dumps(manifest["folders"]))  # fmt: skip
    return manifest
