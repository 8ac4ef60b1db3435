"""Rows → CSV, markdown table and PNG plot. Every row carries versions, GPU and its own status."""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.e2e import host_bound
from benchmarks.e2e.backends import EngineSetup
from benchmarks.e2e.floor_rows import publication
from benchmarks.e2e.jitcount import MOE_KERNEL, moe_kernels_by_rank
from benchmarks.e2e.runner import JobResult
from benchmarks.e2e.spec import Workload
from benchmarks.e2e.stats import RequestTiming, Sample, aggregate, ratio, summarize_batch, verdict
from kernels.config_files import file_device_name

CSV_COLUMNS: tuple[str, ...] = (
    "model", "split", "options", "layers", "layers_real", "backend", "same_engine_as", "moe_backend_arg",
    "moe_backend_logged", "moe_kernel_logged", "default_moe_config", "tuned_config", "tuned_file_shipped",
    "default_config_check", "routing", "routing_logged", "pinning", "input_len", "output_len", "conc", "reps",
    "decode_tps_best", "decode_tps_median", "output_tps_best", "output_tps_median",
    "ttft_ms_best", "ttft_ms_median", "tpot_ms_best", "tpot_ms_median", "spread_pct",
    "hbm_read_tbps", "floor_tpot_ms", "floor_fraction", "floor_check", "engine_thread_pct", "host_bound",
    "ratio_vs_auto", "verdict_vs_auto", "engine_start_cold_s", "engine_start_warm_s", "start_caches",
    "triton_jit_at_start", "moe_jit_at_start_by_rank", "moe_jit_while_serving", "moe_jit_while_serving_by_rank",
    "comm_env", "comm_logged", "status", "error", "note", "compile", "vllm", "torch", "triton", "flashinfer", "gpu",
    "timestamp",
)  # fmt: skip

_FLOAT_COLUMNS = {
    "decode_tps_best", "decode_tps_median", "output_tps_best", "output_tps_median", "ttft_ms_best",
    "ttft_ms_median", "tpot_ms_best", "tpot_ms_median", "spread_pct", "ratio_vs_auto",
    "hbm_read_tbps", "floor_tpot_ms", "floor_fraction", "engine_start_cold_s", "engine_start_warm_s",
    "engine_thread_pct",
}  # fmt: skip
_INT_COLUMNS = {"layers", "layers_real", "input_len", "output_len", "conc", "reps", "triton_jit_at_start",
                "moe_jit_while_serving"}  # fmt: skip


def sample_from_event(event: dict[str, Any]) -> Sample:
    """One worker 'sample' event → Sample; without per-request metrics only output tok/s is known."""
    requests = event.get("requests")
    if requests:
        return summarize_batch([RequestTiming(**r) for r in requests], event["wall_s"])
    nan = float("nan")
    return Sample(output_tps=event["output_tokens"] / event["wall_s"], decode_tps=nan, ttft_ms=nan, tpot_ms=nan)


def jit_events(result: JobResult) -> dict[str, Any]:
    """The Triton kernels the engine compiled at start (by the first request) and while serving, in total and per
    rank (served engine; empty for the offline one)."""
    first = next((e for e in result.events if e.get("event") == "first_request"), {})
    serving = next((e for e in result.events if e.get("event") == "serving_compiles"), {})
    return {
        "jit_at_start": first.get("triton_compiled_at_start") or {},
        "jit_at_start_by_rank": first.get("triton_compiled_at_start_by_rank") or {},
        "rank_cache_dirs": first.get("rank_cache_dirs") or [],
        "jit_while_serving": serving.get("triton_compiled_while_serving"),
        "jit_while_serving_by_rank": serving.get("triton_compiled_while_serving_by_rank") or {},
    }


def default_config_check(result: JobResult, tuned_file_shipped: str) -> str:
    """The issue's check: no "Using default MoE config" where this project ships the file the row's Triton reads.
    'pass' / 'FAIL' on Triton rows that read a shipped file; '' where the check does not apply, including a row whose
    GPU is not the shipped file's (vLLM looks files up by `device_name=`, kernels.config_files.file_device_name: on an
    H100 the H200's file is never read, and vLLM's default tiles are expected, not a failure)."""
    if not tuned_file_shipped or (result.log.moe_backend or "").upper() != "TRITON":
        return ""
    gpu = result.versions.get("gpu", "")
    if gpu and f"device_name={file_device_name(gpu)}," not in tuned_file_shipped:
        return ""
    return "FAIL" if result.log.default_moe_config else "pass"


def jit_columns(result: JobResult) -> dict[str, Any]:
    jit = jit_events(result)
    ranks = jit["rank_cache_dirs"]
    serving = jit["jit_while_serving"]
    return {
        "triton_jit_at_start": sum(jit["jit_at_start"].values()) if jit["jit_at_start"] or ranks else None,
        "moe_jit_at_start_by_rank": moe_kernels_by_rank(jit["jit_at_start_by_rank"], ranks),
        "moe_jit_while_serving": None if serving is None else serving.get(MOE_KERNEL, 0),
        "moe_jit_while_serving_by_rank": moe_kernels_by_rank(jit["jit_while_serving_by_rank"], ranks)
        if serving is not None
        else "",
    }


def build_rows(
    *,
    model: str,
    layers: int,
    layers_real: int,
    setup: EngineSetup,
    result: JobResult,
    warm_start_s: float | None,
    workloads: Sequence[Workload],
    compile_mode: str,
    timestamp: str,
    facts: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One row per workload. `facts` (split, options, tuned_file_shipped, comm_env) go into every row."""
    facts = facts or {}
    engine_facts = {
        **jit_columns(result),
        "default_config_check": default_config_check(result, facts.get("tuned_file_shipped", "")),
        "comm_logged": ";".join(f"{k}={v}" for k, v in result.log.comm.items()),
        "routing_logged": result.log.routing,
    }
    rows = []
    for w in workloads:
        events = [
            s
            for s in result.samples
            if (s["input_len"], s["output_len"], s["conc"]) == (w.input_len, w.output_len, w.conc)
        ]
        row: dict[str, Any] = {
            "model": model,
            "layers": layers,
            "layers_real": layers_real,
            "backend": setup.backend,
            "same_engine_as": setup.same_engine_as or "",
            "moe_backend_arg": setup.moe_backend or "",
            "moe_backend_logged": result.log.moe_backend or "",
            "moe_kernel_logged": " | ".join(result.log.project_kernel),
            "default_moe_config": result.log.default_moe_config,
            "tuned_config": ";".join(Path(f).name for f in result.log.tuned_config_files),
            "input_len": w.input_len,
            "output_len": w.output_len,
            "conc": w.conc,
            "engine_start_cold_s": result.start_s,
            "engine_start_warm_s": warm_start_s,
            "status": result.status if events or result.status != "ok" else "no_samples",
            "error": result.error,
            "note": setup.note,
            "compile": compile_mode,
            "timestamp": timestamp,
            **{k: result.versions.get(k, "") for k in ("vllm", "torch", "triton", "flashinfer", "gpu")},
            **facts,
            **engine_facts,
        }
        if events:
            agg = aggregate([sample_from_event(e) for e in events])
            row.update(vars(agg), **host_bound.columns(events))
        rows.append(row)
    return rows


def copy_rows_for(rows: Iterable[dict[str, Any]], model: str, source: str, setup: EngineSetup) -> list[dict[str, Any]]:
    """A backend whose engine equals another's gets that engine's numbers, marked as such."""
    return [
        {**r, "backend": setup.backend, "same_engine_as": source, "note": setup.note}
        for r in rows
        if r["model"] == model and r["backend"] == source
    ]


def _key(row: dict[str, Any]) -> tuple[Any, ...]:
    """One measured point: the same model at another split or with other options is another point."""
    return (row["model"], row.get("split") or "", row.get("options") or "", row.get("routing") or "",
            row.get("pinning") or "", row["input_len"], row["output_len"], row["conc"])  # fmt: skip


def num(value: Any) -> float | None:
    if value in (None, ""):
        return None
    f = float(value)
    return None if math.isnan(f) else f


OPTIONLESS_AUTO = " vs option-less auto"


def add_ratios(rows: list[dict[str, Any]]) -> None:
    """ratio_vs_auto = decode tok/s (median) / auto's on the same model and workload; verdict vs spread.

    Medians, as the docs read them: a best repetition can part from the median by more than the spread allows for
    (2026-12-06b, Qwen3 at 64: 1.021 by best, 1.017 by median inside 2 % spreads). Rows from before the median
    column fall back to the best.

    A row with options (say the plan with `attention_backend=TRITON_ATTN`) is compared with auto under the same
    options when that was measured, else with auto as vLLM runs it without them (what a user would otherwise
    get); its verdict then ends in OPTIONLESS_AUTO, so the two baselines are never confused."""
    auto = {_key(r): r for r in rows if r["backend"] == "auto"}
    for r in rows:
        base, suffix = auto.get(_key(r)), ""
        if base is None and r.get("options"):
            base, suffix = auto.get(_key({**r, "options": ""})), OPTIONLESS_AUTO
        value = ratio(_decode_tps(r), _decode_tps(base) if base else None)
        r["ratio_vs_auto"] = value
        r["verdict_vs_auto"] = (
            verdict(value, num(r.get("spread_pct")) or 0.0, num(base.get("spread_pct")) or 0.0)
            + host_bound.verdict_suffix(r, base)
            + suffix
            if base and r["backend"] != "auto"
            else ""
        )


def _decode_tps(row: dict[str, Any]) -> float | None:
    """The row's median decode tok/s, or its best where the row predates the median."""
    median = num(row.get("decode_tps_median"))
    return median if median is not None else num(row.get("decode_tps_best"))


def row_label(row: dict[str, Any]) -> str:
    """The backend with its options (and pinning): two engines of one backend set apart otherwise are two lines."""
    return (row["backend"] + (f" [{row['options']}]" if row.get("options") else "")
            + (f" [pinned {row['pinning']}]" if row.get("pinning") else ""))  # fmt: skip


_MEASURED = ("ok", "truncated")


def merge_runs(runs: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Rows of several runs of one session → one table: one row per (model, backend, workload), in first-seen
    order. A measured row (ok/truncated) replaces an unmeasured one (skipped_budget, failed, timeout) of an
    earlier run — e.g. a backend a phase had no budget for, run by a follow-up call — and a complete row (ok)
    replaces a truncated one (an engine its phase's deadline cut, run again whole), whichever came first; two
    measured rows of the same kind for one point are an error (which one is the figure would be a silent choice)."""
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for rows in runs:
        for row in rows:
            key = (*_key(row), row["backend"])
            old = merged.get(key)
            if old is None or _rank(row["status"]) > _rank(old["status"]):
                merged[key] = row
            elif _rank(row["status"]) == _rank(old["status"]) and row["status"] in _MEASURED:
                raise ValueError(f"two measured rows for {key}: keep one of the runs out of the merge")
    return list(merged.values())


def _rank(status: str) -> int:
    """unmeasured < truncated < ok: what a later run of the same point may replace."""
    return {"truncated": 1, "ok": 2}.get(status, 0)


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            writer.writerow({k: _fmt_csv(r.get(k)) for k in CSV_COLUMNS})


def _fmt_csv(value: Any) -> Any:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.6g}"
    return "" if value is None else value


def read_csv(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(newline="") as f:
        for raw in csv.DictReader(f):
            row: dict[str, Any] = dict(raw)
            for k in _FLOAT_COLUMNS:
                row[k] = num(row.get(k))
            for k in _INT_COLUMNS:
                row[k] = int(row[k]) if row.get(k) not in (None, "") else None
            row["default_moe_config"] = row.get("default_moe_config") == "True"
            rows.append(row)
    return rows


def _f(value: Any, digits: int = 1) -> str:
    v = num(value)
    return "–" if v is None else f"{v:.{digits}f}"


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    header = (
        "| model | backend (vLLM ran) | routing | in/out | conc | decode tok/s best (median) | vs auto (medians) "
        "| output tok/s best | TTFT ms | TPOT ms | floor ms (÷ TPOT) | spread % | start cold / warm s | status |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in rows:
        ran = r.get("moe_backend_logged") or "?"
        if r.get("default_moe_config"):
            ran += ", default tiles"
        backend = f"{row_label(r)} ({ran})" + (f" = {r['same_engine_as']}" if r.get("same_engine_as") else "")
        vs = _f(r.get("ratio_vs_auto"), 3) + (f" {r['verdict_vs_auto']}" if r.get("verdict_vs_auto") else "")
        model = (
            r["model"]
            + (f" [L={r['layers']}/{r['layers_real']}]" if r.get("layers") != r.get("layers_real") else "")
            + (f" {r['split']}" if r.get("split") else "")
        )
        shown, label = publication(r)
        fig = r if shown else {}
        status = "; ".join(part for part in (r["status"], label, host_bound.label(r)) if part)
        if r.get("pinning"):  # a harness setting serve never makes: a labelled comparison row
            status += f"; pinned ({r['pinning']}): comparison row"
        lines.append(
            f"| {model} | {backend} | {r.get('routing') or '?'} | {r['input_len']}/{r['output_len']} | {r['conc']} "
            f"| {_f(fig.get('decode_tps_best'))} ({_f(fig.get('decode_tps_median'))}) | {vs if shown else '–'} "
            f"| {_f(fig.get('output_tps_best'))} | {_f(fig.get('ttft_ms_median'))} "
            f"| {_f(fig.get('tpot_ms_median'), 2)} "
            f"| {_f(r.get('floor_tpot_ms'), 2)} ({_f(r.get('floor_fraction'), 2)}) "
            f"| {_f(fig.get('spread_pct'))} "
            f"| {_f(r.get('engine_start_cold_s'), 0)}{SHARED_MARK if _shared_start(r) else ''} "
            f"/ {_f(r.get('engine_start_warm_s'), 0)} "
            f"| {status} |"
        )
    envs = sorted(
        {f"vLLM {r['vllm']}, torch {r['torch']}, Triton {r['triton']}, FlashInfer {r['flashinfer']}, {r['gpu']}"
         for r in rows if r.get("vllm")}
    )  # fmt: skip
    notes = [f"Environment: {e}." for e in envs]
    if any(_shared_start(r) for r in rows):
        notes.append(f"{SHARED_MARK} not a cold start: the engine read the Triton kernels the run's earlier engines "
                     "compiled (--share-triton-cache; the CSV's start_caches column).")  # fmt: skip
    footer = "\n" + "\n".join(notes) + "\n" if notes else "\n"
    return header + "\n".join(lines) + "\n" + footer


SHARED_MARK = "†"


def _shared_start(row: dict[str, Any]) -> bool:
    return str(row.get("start_caches") or "empty") != "empty"


def plot(rows: Sequence[dict[str, Any]], path: Path) -> bool:
    """Decode tok/s ratio vs auto over concurrency, one panel per model.

    False, and no file, when matplotlib is absent or no row has a ratio to auto (a run without auto drew empty axes
    until 2026-12-07: benchmarks.e2e.floor_plot.plot_run draws those runs against their HBM floor instead)."""
    if not any(num(r.get("ratio_vs_auto")) is not None for r in rows):
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    models = list(dict.fromkeys(r["model"] for r in rows))
    if not models:
        return False
    fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 4), squeeze=False)
    for ax, model in zip(axes[0], models, strict=True):
        mine = [r for r in rows if r["model"] == model and num(r.get("ratio_vs_auto")) is not None]
        if mine:
            short_in = min(r["input_len"] for r in mine)
            for label in dict.fromkeys(row_label(r) for r in mine if r["backend"] != "auto"):
                pts = sorted((r["conc"], r["ratio_vs_auto"]) for r in mine
                             if row_label(r) == label and r["input_len"] == short_in)  # fmt: skip
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
            compile_modes = "/".join(sorted({str(r.get("compile") or "?") for r in mine}))
            ax.set_title(f"{model} ({short_in} in, compile: {compile_modes})", fontsize=9)
        ax.axhline(1.0, color="grey", linewidth=1)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrent requests")
        ax.set_ylabel("decode tok/s ÷ vLLM auto (best of reps)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_outputs(rows: list[dict[str, Any]], out_dir: Path, stem: str = "h200_e2e") -> list[Path]:
    add_ratios(rows)
    written = [out_dir / f"{stem}.csv", out_dir / f"{stem}.md"]
    write_csv(rows, written[0])
    written[1].write_text(markdown_table(rows))
    return written


STREAM_BASELINE = "openai_sse_v1_completions"
STREAM_COLUMNS = (
    "model", "way", "conc", "input_len", "output_len", "reps", "output_tps_median", "decode_tps_median",
    "ratio_vs_v1_median", "ratio_vs_v1_min", "ratio_vs_v1_max", "api_server_cpu_ms_per_token_median", "failed",
    "vllm", "gpu",
)  # fmt: skip


def stream_rows(model: str, result: JobResult) -> list[dict[str, Any]]:
    """The streaming-at-load check: per way, output tok/s and its ratio to plain /v1/completions SSE, paired
    rep by rep (the three ways ran interleaved on one engine, so each rep's ratio shares its conditions)."""
    events = [e for e in result.events if e.get("event") == "stream_check"]
    by_way: dict[str, dict[int, dict[str, Any]]] = {}
    for e in events:
        by_way.setdefault(e["way"], {})[e["rep"]] = e
    baseline = by_way.get(STREAM_BASELINE, {})
    rows = []
    for way, reps in by_way.items():
        tps = {rep: e["output_tokens"] / e["wall_s"] for rep, e in reps.items()}
        paired = [tps[r] / (baseline[r]["output_tokens"] / baseline[r]["wall_s"]) for r in tps if r in baseline]
        decode = [sample_from_event(e).decode_tps for e in reps.values()]
        cpu = [e["api_server_cpu_ms_per_token"] for e in reps.values() if e.get("api_server_cpu_ms_per_token")]
        first = next(iter(reps.values()))
        rows.append({
            "model": model, "way": way, "conc": first["conc"], "input_len": first["input_len"],
            "output_len": first["output_len"], "reps": len(reps), "output_tps_median": statistics.median(tps.values()),
            "decode_tps_median": statistics.median(decode), "ratio_vs_v1_median": statistics.median(paired),
            "ratio_vs_v1_min": min(paired), "ratio_vs_v1_max": max(paired),
            "api_server_cpu_ms_per_token_median": statistics.median(cpu) if cpu else None,
            "failed": sum(e["failed"] for e in reps.values()),
            "vllm": result.versions.get("vllm", ""), "gpu": result.versions.get("gpu", ""),
        })  # fmt: skip
    return rows


def write_stream_rows(rows: Sequence[dict[str, Any]], path: Path) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=STREAM_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
