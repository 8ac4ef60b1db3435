"""The served engine's start, broken down per cache state: CSV rows, and a bar per start (start_experiments)."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.e2e.report import jit_columns, num
from benchmarks.e2e.runner import JobResult

START_COLUMNS = (
    "model", "split", "options", "backend", "mode", "status", "start_s", "first_request_s", "before_first_log_s",
    "to_engine_core_s", "weights_s", "model_load_s", "dynamo_s",
    "graph_compile_s", "compiled_graph_load_s", "torch_compile_total_s", "cuda_graphs_s", "init_engine_s",
    "warmup_s", "flashinfer_autotune", "triton_compiled_at_start", "triton_compiled_kernels",
    "moe_jit_at_start_by_rank", "moe_jit_while_serving_by_rank", "moe_backend_logged", "compile",
    "vllm", "torch", "triton", "flashinfer", "gpu", "error", "launched_at_epoch_s",
)  # fmt: skip


def start_row(model: str, backend: str, mode: str, result: JobResult, compile_mode: str) -> dict[str, Any]:
    """One start of the served engine, broken down (mode: empty / warm / copied / baked caches)."""
    first = next((e for e in result.events if e.get("event") == "first_request"), {})
    compiled = first.get("triton_compiled_at_start") or {}
    # the launch's wall clock joins the start with what run_queue.sh sampled beside it (start_conditions)
    launched = next((e.get("launched_at") for e in result.events if e.get("event") == "engine_started"), None)
    jit = jit_columns(result)
    return {
        "model": model, "backend": backend, "mode": mode, "status": result.status, "start_s": result.start_s,
        "first_request_s": first.get("seconds"), **result.log.durations,
        "flashinfer_autotune": "flashinfer_autotune_started" in result.log.milestones,
        "triton_compiled_at_start": sum(compiled.values()),
        "triton_compiled_kernels": ";".join(f"{k}x{v}" for k, v in compiled.items()),
        "moe_jit_at_start_by_rank": jit["moe_jit_at_start_by_rank"],
        "moe_jit_while_serving_by_rank": jit["moe_jit_while_serving_by_rank"],
        "moe_backend_logged": result.log.moe_backend or "", "compile": compile_mode,
        **{k: result.versions.get(k, "") for k in ("vllm", "torch", "triton", "flashinfer", "gpu")},
        "error": result.error, "launched_at_epoch_s": launched,
    }  # fmt: skip


def append_start_rows(rows: Sequence[dict[str, Any]], path: Path) -> None:
    new = not path.is_file()
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=START_COLUMNS, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerows(rows)


START_PARTS = (
    ("before_first_log_s", "launch to vLLM's first log (interpreter, imports)"),
    ("to_engine_core_s", "API server to engine core (config, model info, EngineCore start)"),
    ("model_load_s", "model load (weights)"), ("torch_compile_total_s", "torch.compile / AOT load"),
    ("cuda_graphs_s", "CUDA graphs"),
)  # fmt: skip
ENGINE_PARTS = ("model_load_s", "torch_compile_total_s", "cuda_graphs_s")  # inside vLLM's init engine + model load


def plot_start_breakdown(rows: Sequence[dict[str, Any]], path: Path) -> bool:
    """One bar per start mode: the parts vLLM logs (weights, torch.compile or its cache load, CUDA graphs), the
    rest of its engine init, the server's warm-up; before them the launch to vLLM's first log line and from there to the
    engine core's (logparse.process_gaps), and the rest, which no log line times."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    measured = [r for r in rows if num(r.get("start_s")) is not None]
    if not measured:
        return False
    fig, ax = plt.subplots(figsize=(1.6 * len(measured) + 3, 4))
    labels = [f"{r['backend']}\n{r['mode']}" for r in measured]
    bottom = [0.0] * len(measured)
    for key, label in START_PARTS:
        values = [num(r.get(key)) or 0.0 for r in measured]
        if not any(values):
            continue  # rows from before a part was logged (process_gaps came on 2026-12-03)
        ax.bar(labels, values, bottom=bottom, label=label)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    rest_engine = [max(0.0, (num(r.get("init_engine_s")) or 0.0) + (num(r.get("model_load_s")) or 0.0)
                        - sum(num(r.get(k)) or 0.0 for k in ENGINE_PARTS)) for r in measured]  # fmt: skip
    ax.bar(labels, rest_engine, bottom=bottom, label="rest of engine init")
    bottom = [b + v for b, v in zip(bottom, rest_engine, strict=True)]
    warmup = [num(r.get("warmup_s")) or 0.0 for r in measured]
    if any(warmup):
        ax.bar(labels, warmup, bottom=bottom, label="the server's warm-up (option.warmup)")
        bottom = [b + v for b, v in zip(bottom, warmup, strict=True)]
    outside = [max(0.0, float(r["start_s"]) - b) for r, b in zip(measured, bottom, strict=True)]
    ax.bar(labels, outside, bottom=bottom, label="the rest (not timed by a log line)")
    ax.set_ylabel("seconds from process start to /health 200")
    ax.set_title(f"{measured[0]['model']}: served start by cache state", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def read_start_rows(path: Path) -> list[dict[str, Any]]:
    with path.open(newline="") as handle:
        return [dict(r) for r in csv.DictReader(handle)]
