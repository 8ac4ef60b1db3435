"""One served engine: start the real server exactly as `serve` execs it, measure it over HTTP, stop it.

Run by the runner as ``python -m benchmarks.e2e.served_worker JOB.json`` in a process group of its own (a job
past its timeout is killed with its server). The job carries the server's argv (from
benchmarks.e2e.served.served_command); this process's environment is the server's. Events go to the job's
JSON-lines file as soon as they are known (the same events as the offline worker, plus the start breakdown,
the Triton compile counts and the streaming-at-load check), so a killed job leaves what it finished.

Phases: start (until /health answers 200) → first request (`first_request_len` tokens in, 1 out) → compile count →
unless `start_only`: warm-up, the workloads × reps, the streaming check (`stream_check`), the profiled batches
(`profile`: benchmarks/e2e/profile_capture.py), the seeded top-p probe
(sampling variants that compile on first use), compile count again → SIGTERM. A `start_only` job with a `jit_probe`
(the baked-cache start) runs those batch shapes once, 16 tokens out, and counts what they compiled: "zero MoE-kernel
JIT after start" is checked on real traffic, per rank, without the whole workload. The server's log is copied to
this process's stdout at the end, where the runner parses it.
"""

from __future__ import annotations

import faulthandler
import importlib.metadata
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.e2e import pinning, profile_capture
from benchmarks.e2e.host_meter import BatchMeter, process_cpu_s
from benchmarks.e2e.httpload import run_batch
from benchmarks.e2e.jitcount import compiled_kernels, rank_dirs
from benchmarks.e2e.tokenizer import words
from benchmarks.e2e.worker import EventLog, job_main
from entrypoint.bake_cache import stop_server, wait_ready
from entrypoint.caches import model_info

faulthandler.register(signal.SIGUSR1, all_threads=True)
COMPLETIONS = "/v1/completions"
INVOCATIONS = "/invocations"


def versions() -> dict[str, str]:
    """Package versions from their metadata, not tools.measure.versions: importing vLLM and torch only to read
    `__version__` would add ~20 s to a worker whose server imports them again in its own process."""
    found = {}
    for key, dist in (("vllm", "vllm"), ("torch", "torch"), ("triton", "triton"), ("flashinfer", "flashinfer-python")):
        try:
            found[key] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            found[key] = "absent"
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True
        )
        found["gpu"] = smi.stdout.splitlines()[0].strip() if smi.returncode == 0 and smi.stdout.strip() else "cpu"
    except OSError:
        found["gpu"] = "cpu"
    return found


def completion_body(model: str, ids: list[int], output_len: int, **sampling: Any) -> dict[str, Any]:
    sampling = sampling or {"temperature": 0.0}
    return {"model": model, "prompt": ids, "max_tokens": output_len, "min_tokens": output_len, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}, **sampling}  # fmt: skip


def lmi_body(ids: list[int], output_len: int) -> dict[str, Any]:
    return {"inputs": words(ids), "parameters": {"max_new_tokens": output_len, "ignore_eos_token": True,
                                                 "do_sample": False}, "stream": True}  # fmt: skip


class Prompts:
    def __init__(self, vocab: int, seed: int = 1234) -> None:
        self.rng = random.Random(seed)
        self.vocab = vocab

    def ids(self, n: int) -> list[int]:
        # Away from the special tokens at both ends of the vocabulary.
        return [self.rng.randrange(100, self.vocab - 100) for _ in range(n)]


def measure(job: dict[str, Any], events: EventLog, port: int, prompts: Prompts, server_pid: int | None = None) -> bool:
    """Warm-up, then every workload × rep; False when the soft deadline cut it short. Each sample also records the
    host side of its batch (host_meter: CPU of the API server, the engine and its busiest thread; the engine's own
    inter-token latency)."""
    model, deadline = job["served_model"], float(job["soft_deadline"])
    workloads = [tuple(w) for w in job["workloads"]]
    t_warm = time.perf_counter()
    for input_len, conc in dict.fromkeys((w[0], w[2]) for w in workloads):
        run_batch(port, COMPLETIONS, [completion_body(model, prompts.ids(input_len), 8) for _ in range(conc)], "sse")
    events.emit("warmup", seconds=time.perf_counter() - t_warm)
    meter = BatchMeter(server_pid, port)
    for rep in range(int(job["reps"])):
        for input_len, output_len, conc in workloads:
            if time.time() > deadline:
                return False
            bodies = [completion_body(model, prompts.ids(input_len), output_len) for _ in range(conc)]
            meter.start()
            results, wall = run_batch(port, COMPLETIONS, bodies, "sse")
            ended = time.time()  # the sample's end for rep_conditions, before the meter's own reads
            host = meter.stop()
            failed = [r.error or str(r.status) for r in results if r.status != 200 or r.error]
            if failed:
                raise RuntimeError(f"{len(failed)} of {conc} requests failed: {failed[0]}")
            events.emit("sample", t=ended, rep=rep, input_len=input_len, output_len=output_len, conc=conc,
                        wall_s=wall, requests=[r.timing() for r in results],
                        output_tokens=sum(r.num_output_tokens for r in results), **host)  # fmt: skip
    return True


def stream_check(job: dict[str, Any], events: EventLog, port: int, prompts: Prompts, pid: int) -> None:
    """conc streams × N tokens three ways, interleaved per rep: LMI jsonlines and OpenAI SSE on /invocations,
    plain /v1/completions SSE. Same engine, same run: the ratios say what the LMI layer costs at load. Every way
    sends the same text prompt (LMI bodies carry text, so the server tokenizes in all three), and one unrecorded
    round first warms each path (on 2026-12-01 the first LMI round ran at 0.72× the others, the next two at
    0.99-1.01×)."""
    conc, input_len, output_len, reps = (
        int(job["stream_check"][k]) for k in ("conc", "input_len", "output_len", "reps")
    )
    model = job["served_model"]

    def openai(ids: list[int]) -> dict[str, Any]:
        return {**completion_body(model, ids, output_len), "prompt": words(ids)}

    ways = {
        "lmi_jsonlines_invocations": (INVOCATIONS, "jsonlines", lambda ids: lmi_body(ids, output_len)),
        "openai_sse_invocations": (INVOCATIONS, "sse", openai),
        "openai_sse_v1_completions": (COMPLETIONS, "sse", openai),
    }
    for path, wire, make in ways.values():
        run_batch(port, path, [make(prompts.ids(input_len)) for _ in range(conc)], wire)
    for rep in range(reps):
        for way, (path, wire, make) in ways.items():
            before = process_cpu_s(pid)  # the API server's own (the engine core is another process)
            results, wall = run_batch(port, path, [make(prompts.ids(input_len)) for _ in range(conc)], wire)
            cpu = process_cpu_s(pid) - before
            bad = [r.error or str(r.status) for r in results if r.status != 200 or r.error]
            tokens = sum(r.num_output_tokens for r in results)
            events.emit("stream_check", rep=rep, way=way, conc=conc, input_len=input_len, output_len=output_len,
                        wall_s=wall, output_tokens=tokens, requests=[r.timing() for r in results],
                        api_server_cpu_ms_per_token=1000 * cpu / tokens if tokens else None,
                        failed=len(bad), first_error=bad[0] if bad else "")  # fmt: skip


def sampler_probe(job: dict[str, Any], port: int, prompts: Prompts, sizes: tuple[int, ...] = (8, 16)) -> int:
    """Seeded top-p/top-k batches of 8 and more: the sampling variants vLLM compiles on first use."""
    model, ok = job["served_model"], 0
    for conc in sizes:
        bodies = [completion_body(model, prompts.ids(32), 4, temperature=0.8, top_p=0.9, top_k=50, seed=i)
                  for i in range(conc)]  # fmt: skip
        results, _ = run_batch(port, COMPLETIONS, bodies, "sse")
        ok += sum(r.status == 200 and not r.error for r in results)
    return ok


def jit_probe(job: dict[str, Any], port: int, prompts: Prompts) -> int:
    """One batch per (input_len, conc) of the probe, 16 tokens out: the token counts the workload would reach."""
    model, ok = job["served_model"], 0
    for input_len, conc in job["jit_probe"]:
        results, _ = run_batch(port, COMPLETIONS, [completion_body(model, prompts.ids(input_len), 16)
                                                   for _ in range(conc)], "sse")  # fmt: skip
        ok += sum(r.status == 200 and not r.error for r in results)
    return ok


def run(job: dict[str, Any]) -> int:
    events = EventLog(Path(job["result_path"]))
    events.emit("versions", import_s=0.0, **versions())
    events.emit("engine_argv", argv=job["argv"])
    caches = [Path(p) for p in job.get("cache_dirs", [])]
    baseline = compiled_kernels(caches)
    port = int(job["port"])
    server_log = Path(job["server_log"])
    launched_at = time.time()  # the wall clock vLLM's log stamps use: logparse.process_gaps splits the start by it
    # what `serve` does before its exec, in the start's time (no-op without MOE_BAKED_MODEL_INFO: that line says so)
    print(model_info.seed(os.environ), flush=True)
    with server_log.open("wb") as log:
        server = subprocess.Popen(job["argv"], stdout=log, stderr=subprocess.STDOUT)
    try:
        start_s = wait_ready(server, port, float(job["soft_deadline"]))
        events.emit("engine_started", start_s=start_s, launched_at=launched_at)
        if job.get("pin"):  # a labelled comparison row (benchmarks/e2e/pinning.py): after the start, before any request
            pinned = pinning.apply(pinning.parse_pin(job["pin"]), server.pid)
            events.emit("pinned", spec=job["pin"], allowed={role: {str(k): v for k, v in pids.items()}
                                                            for role, pids in pinned.items()})  # fmt: skip
            print(f"pinned ({job['pin']}): {pinned}", flush=True)
        prompts = Prompts(int(job["vocab_size"]))
        first_body = completion_body(job["served_model"], prompts.ids(int(job["first_request_len"])), 1)
        results, first_s = run_batch(port, COMPLETIONS, [first_body], "sse")
        after_start = compiled_kernels(caches)
        events.emit("first_request", seconds=first_s, status=results[0].status, error=results[0].error,
                    triton_compiled_at_start=after_start.new_since(baseline),
                    triton_compiled_at_start_by_rank=after_start.new_by_rank(baseline),
                    rank_cache_dirs=rank_dirs(caches))  # fmt: skip
        complete = True
        if not job["start_only"]:
            complete = measure(job, events, port, prompts, server.pid)
            if complete and job.get("stream_check"):
                stream_check(job, events, port, prompts, server.pid)
            if complete and job.get("profile"):  # after the measured rows: the profiler never runs during them

                def send(conc: int, input_len: int, output_len: int) -> None:
                    bodies = [completion_body(job["served_model"], prompts.ids(input_len), output_len)] * conc
                    run_batch(port, COMPLETIONS, bodies, "sse")

                profile_capture.capture(job, port, send, events.emit)
            probe_ok = sampler_probe(job, port, prompts)
            serving = compiled_kernels(caches)
            events.emit("serving_compiles", seeded_top_p_requests_ok=probe_ok,
                        triton_compiled_while_serving=serving.new_since(after_start),
                        triton_compiled_while_serving_by_rank=serving.new_by_rank(after_start))  # fmt: skip
        elif job.get("jit_probe"):
            probe_ok = jit_probe(job, port, prompts)
            if job.get("sampler_probe"):  # the seeded batches too: "nothing compiles after start" covers them
                probe_ok += sampler_probe(job, port, prompts, tuple(job["sampler_probe"]))
            serving = compiled_kernels(caches)
            events.emit("serving_compiles", jit_probe_requests_ok=probe_ok,
                        triton_compiled_while_serving=serving.new_since(after_start),
                        triton_compiled_while_serving_by_rank=serving.new_by_rank(after_start))  # fmt: skip
        events.emit("done", truncated=not complete)
        return 0
    finally:
        code = stop_server(server, timeout_s=30)
        events.emit("server_stopped", exit_code=code)
        sys.stdout.write(server_log.read_text(errors="replace"))
        sys.stdout.flush()


def main(argv: list[str]) -> int:
    return job_main(argv, run, "benchmarks.e2e.served_worker")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
