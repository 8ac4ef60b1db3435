"""One engine, one subprocess: start vLLM's offline engine, warm up, measure, append JSON lines.

Run by ``runner`` as ``python -m benchmarks.e2e.worker JOB.json``; never imported by the harness itself,
because importing vLLM (≈20 s) and owning a GPU context belong in a process that the runner can time out
and kill. Each event is flushed as soon as it is known, so a job killed at its timeout still leaves its
versions, its engine start time and every finished sample behind.
"""

from __future__ import annotations

import faulthandler
import json
import random
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools import measure

# On timeout the runner sends SIGUSR1 before SIGKILL: every thread's Python stack lands in the log,
# which says where a start hung (autotuner, graph capture, ...). sitecustomize does the same in vLLM's
# engine-core subprocess.
faulthandler.register(signal.SIGUSR1, all_threads=True)


class EventLog:
    def __init__(self, path: Path) -> None:
        self._file = path.open("a", buffering=1)

    def emit(self, event: str, **data: Any) -> None:
        self._file.write(json.dumps({"event": event, "t": time.time(), **data}) + "\n")
        self._file.flush()


def versions() -> dict[str, str]:
    """The row's versions and GPU (tools/measure.py, the fields every benchmark row carries)."""
    return {**measure.versions(("vllm", "torch", "triton", "flashinfer")), "gpu": measure.gpu_name()}


def compilation_config(mode: str, max_conc: int) -> dict[str, Any] | None:
    """'none': no torch.compile, full CUDA graphs for decode batches up to max_conc (short starts, the
    setting of the first H200 figures); 'default': whatever vLLM does by default; 'eager': no graphs."""
    if mode == "none":
        return {"mode": 0, "cudagraph_mode": "FULL_DECODE_ONLY", "max_cudagraph_capture_size": max_conc}
    if mode == "eager":
        return {"mode": 0, "cudagraph_mode": "NONE"}
    return None


def engine_kwargs(job: dict[str, Any]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "model": job["model_dir"],
        "load_format": "dummy",
        "skip_tokenizer_init": True,
        "max_num_seqs": job["max_num_seqs"],
        "max_model_len": job["max_model_len"],
        "enable_prefix_caching": False,  # every repetition must prefill its prompt again
        "disable_log_stats": False,  # RequestOutput.metrics carries per-request timestamps only then
        "gpu_memory_utilization": job["gpu_memory_utilization"],
        "seed": 0,
    }
    cc = compilation_config(job["compile"], job["max_num_seqs"])
    if cc is not None:
        kwargs["compilation_config"] = cc
    kwargs.update(job.get("engine_kwargs", {}))
    return kwargs


def prompts(rng: random.Random, vocab: int, input_len: int, conc: int) -> list[dict[str, list[int]]]:
    # Random ids away from the special tokens at both ends of the vocabulary.
    return [{"prompt_token_ids": [rng.randrange(100, vocab - 100) for _ in range(input_len)]} for _ in range(conc)]


def request_timings(outputs: list[Any]) -> list[dict[str, float]] | None:
    timings = []
    for out in outputs:
        m = getattr(out, "metrics", None)
        if m is None or not getattr(m, "first_token_ts", 0.0):
            return None
        timings.append(
            {
                "num_output_tokens": len(out.outputs[0].token_ids),
                "ttft_s": float(m.first_token_latency),
                "first_token_ts": float(m.first_token_ts),
                "last_token_ts": float(m.last_token_ts),
            }
        )
    return timings


def run(job: dict[str, Any]) -> int:
    events = EventLog(Path(job["result_path"]))
    t_import = time.perf_counter()
    from vllm import LLM, SamplingParams

    events.emit("versions", import_s=time.perf_counter() - t_import, **versions())
    kwargs = engine_kwargs(job)
    events.emit("engine_kwargs", kwargs={k: v for k, v in kwargs.items() if k != "model"})
    t_start = time.perf_counter()
    llm = LLM(**kwargs)
    events.emit("engine_started", start_s=time.perf_counter() - t_start)
    if job["start_only"]:
        events.emit("done", truncated=False)
        return 0

    vocab = int(job["vocab_size"])
    deadline = float(job["soft_deadline"])
    workloads = [tuple(w) for w in job["workloads"]]
    rng = random.Random(1234)

    def generate(input_len: int, output_len: int, conc: int) -> tuple[list[Any], float]:
        sp = SamplingParams(
            max_tokens=output_len, min_tokens=output_len, ignore_eos=True, temperature=0.0, detokenize=False
        )
        batch = prompts(rng, vocab, input_len, conc)
        t0 = time.perf_counter()
        outs = llm.generate(batch, sp, use_tqdm=False)
        return outs, time.perf_counter() - t0

    # Warm-up: one short pass per distinct (input_len, conc) JIT-compiles the prefill shapes before timing.
    t_warm = time.perf_counter()
    for input_len, conc in dict.fromkeys((w[0], w[2]) for w in workloads):
        generate(input_len, 8, conc)
    events.emit("warmup", seconds=time.perf_counter() - t_warm)

    for rep in range(int(job["reps"])):
        for input_len, output_len, conc in workloads:
            if time.time() > deadline:
                events.emit("done", truncated=True)
                return 0
            outs, wall = generate(input_len, output_len, conc)
            events.emit(
                "sample",
                rep=rep,
                input_len=input_len,
                output_len=output_len,
                conc=conc,
                wall_s=wall,
                requests=request_timings(outs),
                output_tokens=sum(len(o.outputs[0].token_ids) for o in outs),
            )
    events.emit("done", truncated=False)
    return 0


def job_main(argv: list[str], run_job: Callable[[dict[str, Any]], int], prog: str) -> int:
    """`python -m PROG JOB.json` for both workers: an exception becomes an `error` event before it propagates."""
    if len(argv) != 1:
        print(f"usage: python -m {prog} JOB.json", file=sys.stderr)
        return 2
    job = json.loads(Path(argv[0]).read_text())
    try:
        return run_job(job)
    except Exception as exc:
        EventLog(Path(job["result_path"])).emit("error", error=f"{type(exc).__name__}: {exc}"[:2000])
        raise
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def main(argv: list[str]) -> int:
    return job_main(argv, run, "benchmarks.e2e.worker")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
