"""Tune on this GPU what the image does not ship: `python -m entrypoint tune`, and the first step of `bake-cache`.

For the plan `serve` runs (issue 32): vLLM's Triton fused-MoE tiles for the model's MoE shape under the plan's TP/EP
split, at the batch sizes the served engine runs (entrypoint.resolve.tune_targets: CUDA-graph capture sizes, then
prefill chunks; decode sizes first, so a budget cut keeps what decode needs), with uniform random routing as vLLM's
own tuner routes. Then our kernel against vLLM's with the chosen tile at M = 1..16 → this shape's dispatch row, by the
shipped table's 1.03x rule (kernels/tuning/dispatch_rows.py). Written under the layer's `tuned/` folder, under vLLM's
file name, with a provenance.json (date, GPU, versions, speedups) and the table; the resolver then prefers them over
the image's files (entrypoint.resolve.layer_files). A killed run resumes from `tune-state.jsonl` beside `tuned/`.

The budget covers everything after the plan is known (compiles, timings, the dispatch check): the tiles stop taking
new measurements at ``budget - reserve`` during decode sizes, the dispatch check runs, then prefill sizes use what is
left. An M not reached keeps vLLM's tile, so no written tile is slower than vLLM's at any M in the run.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from entrypoint.caches.tune_defaults import MODES
from entrypoint.resolve.layer_files import TUNED_DISPATCH_FILE, TUNED_FOLDER
from entrypoint.resolve.plan import Plan
from entrypoint.resolve.tune_targets import TuneTarget, plan_tune_target
from entrypoint.utils.errors import ConfigError
from kernels.config_files import Tile, file_device_name
from kernels.dispatch import DISPATCH_FILE
from kernels.shapes import KernelShape
from kernels.tuning.dispatch_rows import OURS_MS, KernelPair, dispatch_row, merged_table
from kernels.tuning.search import Tuner, TuneState, candidate_tiles, write_shape

log = logging.getLogger("entrypoint.tune")
STATE_FILE = "tune-state.jsonl"  # beside tuned/, so the layer's tuned/ holds only what the resolver reads
DISPATCH_RESERVE = 0.15  # share of the budget kept for our kernel against vLLM's, taken from the decode tiles
DOCS = "docs/kernels.md"


class Bench(Protocol):
    """How the tune measures (kernels/tuning/gpu.GpuBench on the GPU; a fake in the CPU tests)."""

    def incumbent_for(self, shape: KernelShape, m: int) -> Tile: ...
    def precompile(self, shape: KernelShape, tiles_for: Callable[[int], Sequence[Tile]], ms: Sequence[int]) -> int: ...
    def measure(self, shape: KernelShape, m: int, tile: Tile, batches: int) -> float: ...
    def pair(self, shape: KernelShape, m: int, tile: Tile) -> KernelPair: ...


@dataclass(frozen=True)
class TuneOutcome:
    target: TuneTarget
    tuned_ms: tuple[int, ...]
    untuned_ms: tuple[int, ...]  # reached by no measurement: vLLM's tile stays
    speedups: Mapping[int, float]  # M -> incumbent µs / chosen µs
    pairs: tuple[KernelPair, ...]
    ours_ranges: tuple[tuple[int, int], ...]
    seconds: float
    written: tuple[str, ...]


def require_gpu(mode: str, flavour: str | None, gpu_visible: bool, where: str) -> None:
    """Refuse (exit 2) where tuning is asked for, or the image is the GPU one, and no NVIDIA GPU is visible."""
    if mode not in MODES:
        raise ConfigError(f"{where} --tune", mode, "is not a tune mode", ", ".join(MODES))
    if gpu_visible or mode == "off" or (mode == "auto" and flavour != "cuda"):
        return
    wanted = "--tune on" if mode == "on" else f"the {flavour or 'GPU'} image"
    raise ConfigError(
        f"{where} --tune",
        mode,
        f"no NVIDIA GPU is visible, and {wanted} tunes kernels on the GPU the endpoint serves on",
        "a run on that GPU host (docker run --gpus all ..., or make cache-layer there), or --tune off",
    )


def require_planned_gpu(planned: str, present: str, where: str) -> None:
    """Refuse (exit 2) a tune planned for one GPU (--gpu) on a host whose GPU is another: its files would carry the
    present GPU's name and hold that GPU's timings (2026-12-06e: `--gpu H200` on an H100 logged H200 throughout)."""
    if file_device_name(planned) != file_device_name(present):
        raise ConfigError(
            f"{where} --gpu",
            planned,
            f"is not this host's GPU ({present}), and a tune times the GPU it runs on",
            "the GPU present (leave --gpu out: NVML names it), or the run on a host with that GPU",
        )


def decide(plan: Plan, mode: str) -> tuple[TuneTarget | None, str]:
    """What to tune for this plan, and the one reason line that says so. Pure."""
    if mode == "off":
        return None, "tune: off (--tune off): the image's and vLLM's tiles are used as they are"
    if plan.gpu.kind != "cuda":
        return None, "tune: skipped: the CPU engine runs no Triton MoE tiles"
    if plan.effective_moe_backend != "triton":
        backend = plan.effective_moe_backend or "none (dense model)"
        return None, f"tune: skipped: the plan's MoE backend is {backend}; the tiles are vLLM's Triton MoE's ({DOCS})"
    try:
        target = plan_tune_target(plan, plan.gpu.name)
    except ValueError as err:
        return None, f"tune: skipped: {err}"
    return target, (
        f"tune: {target.file_name} at M={','.join(map(str, target.ms))} on {plan.gpu.name}, uniform routing ({DOCS})"
    )


def _progress_bar(total: int, desc: str) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:  # no bar, the log lines still say where the tune is
        return None
    return tqdm(total=total, desc=desc, unit="timing", file=sys.stderr, mininterval=5.0)


def _ours_done(state: TuneState) -> dict[int, KernelPair]:
    """Our-kernel pairs a killed run already measured (kind "ours" records of the state file)."""
    fields = {f.name for f in dataclasses.fields(KernelPair)}
    return {
        int(rec["m"]): KernelPair(**{k: v for k, v in rec.items() if k in fields})
        for rec in state.others
        if rec.get("kind") == "ours"
    }


def run_tune(
    target: TuneTarget,
    layer: Path,
    budget_s: float,
    bench: Bench,
    device_name: str,
    versions: Mapping[str, str],
    command: str,
    clock: Callable[[], float] = time.monotonic,
    shipped_table: Path = DISPATCH_FILE,
    progress: Callable[[int, str], Any] = _progress_bar,
) -> TuneOutcome:
    """Tune ``target`` within ``budget_s`` seconds of ``clock``; write layer/tuned/ (file, provenance, table)."""
    t0 = clock()
    end = t0 + budget_s
    shape = target.shape
    state = TuneState.load(layer / STATE_FILE)
    tiles_end = end - DISPATCH_RESERVE * budget_s
    tuner = Tuner(bench.measure, state, tiles_end, bench.incumbent_for, clock=clock, log=log.info)
    left = tuner.planned(shape, target.ms)
    bar = progress(left + len([m for m in OURS_MS if m in target.decode_ms]), f"tune {target.file_name}")
    if bar is not None:
        tuner.progress = bar.update

    def tiles_for(m: int) -> list[Tile]:
        return candidate_tiles(shape, m, bench.incumbent_for(shape, m))

    pending = [m for m in target.ms if (shape.key, m) not in state.final]
    if pending:
        count = bench.precompile(shape, tiles_for, pending)
        log.info("tune: %d kernel variants compiled for %d batch sizes in %.0f s", count, len(pending), clock() - t0)
    finals = tuner.tune_shape(shape, target.decode_ms)
    pairs = _dispatch_pairs(target, bench, finals, state, end, clock, bar)
    tuner.deadline = end
    if len(finals) == len(target.decode_ms):
        finals.update(tuner.tune_shape(shape, target.prefill_ms))
    if bar is not None:
        bar.close()
    tuned = layer / TUNED_FOLDER
    written = []
    if finals:
        path = write_shape(shape, finals, bench.incumbent_for, tuned, versions, command, target.ms, device_name)
        written.append(path.name)
    ranges: tuple[tuple[int, int], ...] = ()
    if pairs:
        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        row = dispatch_row(shape, Path(shape.model.name).name or "model", device_name, pairs, stamp)
        table = merged_table(json.loads(shipped_table.read_text()), row, command)
        tuned.mkdir(parents=True, exist_ok=True)
        (tuned / TUNED_DISPATCH_FILE).write_text(json.dumps(table, indent=1) + "\n")
        written.append(TUNED_DISPATCH_FILE)
        ranges = tuple((lo, hi) for lo, hi in row["token_ranges"])
    return TuneOutcome(
        target=target,
        tuned_ms=tuple(sorted(finals)),
        untuned_ms=tuple(m for m in target.ms if m not in finals),
        speedups={m: float(r["speedup"]) for m, r in sorted(finals.items())},
        pairs=tuple(pairs),
        ours_ranges=ranges,
        seconds=clock() - t0,
        written=tuple(written),
    )


def _dispatch_pairs(
    target: TuneTarget,
    bench: Bench,
    finals: Mapping[int, Mapping[str, Any]],
    state: TuneState,
    end: float,
    clock: Callable[[], float],
    bar: Any,
) -> list[KernelPair]:
    """Our kernel against vLLM's with the tile vLLM will run (the tuned one, else its own) at M = 1..16."""
    done = _ours_done(state)
    pairs = []
    for m in (m for m in OURS_MS if m in target.decode_ms):
        if m in done:
            pairs.append(done[m])
            continue
        if clock() >= end:
            break
        tile = finals[m]["tile"] if m in finals else bench.incumbent_for(target.shape, m)
        try:
            pair = bench.pair(target.shape, m, tile)
        except Exception as exc:  # our kernel cannot run this shape: vLLM's kernel keeps every M
            log.info("tune: our kernel at M=%d: %s: %s; vLLM's kernel stays", m, type(exc).__name__, exc)
            break
        pairs.append(pair)
        state.add_other({"kind": "ours", **dataclasses.asdict(pair)})
        if bar is not None:
            bar.update(1)
    return pairs


def summary_lines(outcome: TuneOutcome) -> list[str]:
    """What the tune found, one line each (the log and the CLI print them)."""
    t = outcome.target
    sp = ", ".join(f"M={m} x{s:.3f}" for m, s in outcome.speedups.items()) or "none"
    lines = [
        f"tune: {t.file_name}: {len(outcome.tuned_ms)} of {len(t.ms)} batch sizes tuned in {outcome.seconds:.0f} s; "
        f"chosen tile vs vLLM's: {sp}",
    ]
    if outcome.untuned_ms:
        lines.append(f"tune: budget reached before M={','.join(map(str, outcome.untuned_ms))}: vLLM's tiles stay there")
    if outcome.pairs:
        ours = ", ".join(f"M={p.m} x{p.speedup:.3f}" for p in outcome.pairs)
        where = ", ".join(f"M={lo}..{hi}" if lo != hi else f"M={lo}" for lo, hi in outcome.ours_ranges) or "no M"
        lines.append(f"tune: our kernel vs vLLM's tuned one: {ours}; dispatched at {where} (>= 1.03x, uniform and hot)")
    return lines


def tune_for_plan(plan: Plan, layer: Path, mode: str, budget_s: float, command: str) -> TuneOutcome | None:
    """Decide, and tune on this process's GPU when the plan has something to tune; logs one reason line."""
    target, reason = decide(plan, mode)
    log.info("%s", reason)
    if target is None:
        return None
    from entrypoint.moe_plugin.triton_experts import project_kernel
    from kernels.tuning import gpu
    from kernels.tuning.timer import versions

    require_planned_gpu(plan.gpu.name, gpu.device_name(), "tune")
    bench = gpu.GpuBench(gpu.ProjectKernel(*project_kernel()))
    made_with = {**versions(("triton", "vllm", "torch")), "gpu": gpu.device_name()}
    try:
        outcome = run_tune(target, layer, budget_s, bench, gpu.device_name(), made_with, command)
    finally:
        bench.close()
    for line in summary_lines(outcome):
        log.info("%s", line)
    return outcome


def flavour(environ: Mapping[str, str] = os.environ) -> str | None:
    """The image's flavour (cuda or cpu), None outside the image."""
    return environ.get("MOE_SERVING_FLAVOUR")
