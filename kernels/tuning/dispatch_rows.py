"""A dispatch row for one shape from a bake-time measurement: the M values where our kernel beats vLLM's tuned one.

Our kernel runs the fastest of a small sweep around its default heuristic (ops.fused_moe_fp8.candidate_configs),
timed with uniform routing; a config other than the default goes into the row's entry for that M, and the plugin
passes it to the kernel (kernels/dispatch.py, DispatchRow.kernel_config). The rule is the shipped table's
(benchmarks/kernels/dispatch_table.py, kernels/fused_moe_dispatch.json): at each measured M our kernel must be at least
``MIN_SPEEDUP`` faster than vLLM's ``fused_experts`` running the tile the tune just chose, with uniform routing and,
above M = 1, with a few hot experts (kernels/tuning/routing_weights.py); winning neighbours merge into ranges. The
layer's table is the image's rows with this shape's row in place of any row for the same key, so one file still
answers every shape. Pure: no GPU, no torch.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kernels.config_files import file_device_name
from kernels.dispatch import COMPARISON_ONLY_FIELDS, KERNEL_CONFIG_FIELDS, parse_row, token_ranges
from kernels.shapes import KernelShape

T = TypeVar("T")
MIN_SPEEDUP = 1.03  # the shipped table's margin: three times the run-to-run spread of M <= 4 rows
# decode sizes where our kernel can win: the shipped table's rows never won above M = 8 on any shape
OURS_MS = (1, 2, 4, 8, 16)
SWEEP_MARGIN = 0.02  # another config of our kernel must beat the default heuristic by this (run-to-run noise)
_KEY_FIELDS = ("experts", "n", "hidden", "top_k", "scales", "device")


@dataclass(frozen=True)
class KernelPair:
    """One M: our kernel's and vLLM's µs per layer call, uniform routing and (M > 1) a few hot experts."""

    m: int
    ours_us: float
    vllm_us: float
    ours_hot_us: float | None = None
    vllm_hot_us: float | None = None
    # our kernel's config (ops.fused_moe_fp8.MoEKernelConfig fields) when the tune's sweep beat the default heuristic
    config: Mapping[str, int | bool] | None = None

    @property
    def speedup(self) -> float:
        return self.vllm_us / self.ours_us

    @property
    def speedup_if_hot(self) -> float | None:
        if self.m == 1:
            return self.speedup  # one token: no routing can share or skew anything
        if self.ours_hot_us is None or self.vllm_hot_us is None:
            return None
        return self.vllm_hot_us / self.ours_hot_us

    def wins(self, min_speedup: float) -> bool:
        hot = self.speedup_if_hot
        return self.speedup >= min_speedup and hot is not None and hot >= min_speedup


def choose_config(timed: Sequence[tuple[float, T]], default: T, margin: float = SWEEP_MARGIN) -> tuple[float, T]:
    """The fastest (µs, config) of a sweep, unless the default heuristic is within ``margin`` of it (then the default:
    a config chosen by noise would be carried in the layer for nothing). ``timed`` holds what compiled."""
    if not timed:
        raise ValueError("no config of our kernel compiled for this shape")
    best_us, best = min(timed, key=lambda t: t[0])
    default_us = next((us for us, config in timed if config == default), math.inf)
    return (default_us, default) if default_us <= best_us * (1 + margin) else (best_us, best)


def config_record(config: Any) -> dict[str, int | bool]:
    """What a row keeps of a chosen MoEKernelConfig (or of its fields as a tune-state file holds them): the fields a
    tune chooses. A comparison-only switch that is on, or a field neither list of kernels/dispatch.py names, is
    refused: a row ships what was measured as the kernel."""
    values = dict(config) if isinstance(config, Mapping) else dataclasses.asdict(config)
    unknown = sorted(set(values) - set(KERNEL_CONFIG_FIELDS) - set(COMPARISON_ONLY_FIELDS))
    if unknown:
        raise ValueError(f"kernel config fields {unknown}: name each in kernels/dispatch.py (tuned or comparison-only)")
    on = [name for name in COMPARISON_ONLY_FIELDS if values.get(name)]
    if on:
        raise ValueError(f"kernel config {values}: {', '.join(on)} is a comparison switch, not a tune's choice")
    return {name: values[name] for name in KERNEL_CONFIG_FIELDS if name in values}


def dispatch_row(
    shape: KernelShape,
    name: str,
    device_name: str,
    pairs: Iterable[KernelPair],
    measured_at: str,
    min_speedup: float = MIN_SPEEDUP,
) -> dict[str, Any]:
    """The table row (kernels/dispatch.py's format) for ``shape`` on ``device_name``; ranges may be empty."""
    measured = sorted(pairs, key=lambda p: p.m)
    entries = []
    for p in measured:
        entry = {
            "m": p.m,
            "ours_us": round(p.ours_us, 2),
            "vllm_us": round(p.vllm_us, 2),
            "speedup": round(p.speedup, 3),
        }
        if p.speedup_if_hot is not None:
            entry["speedup_if_hot"] = round(p.speedup_if_hot, 3)
        if p.config:  # a state file written before 2026-12-06e holds every field: resumed, it is recorded the same
            entry["config"] = config_record(p.config)
        entries.append(entry)
    ranges = token_ranges((p.m, p.wins(min_speedup)) for p in measured)
    row = table_row(shape, name, file_device_name(device_name), ranges, measured_at, entries)
    parse_row(row, f"the tuned row for {name}")  # what the plugin and the resolver will read
    return row


def table_row(
    shape: KernelShape, name: str, device: str, ranges: list[list[int]], measured_at: str, measured: list[dict]
) -> dict[str, Any]:
    """One row of kernels/dispatch.py's format (``device`` as vLLM names it in its files: NVIDIA_H200)."""
    return {
        "shape": name,
        "device": device,
        "experts": shape.e,
        "n": shape.n,
        "hidden": shape.h,
        "top_k": shape.topk,
        "scales": "block-dynamic" if shape.model.block_fp8 else "tensor-static",
        "activation": "silu" if shape.model.gated else "relu2",
        "token_ranges": ranges,
        "measured_at": measured_at,
        "measured": measured,
    }


def merged_table(shipped: Mapping[str, Any], row: Mapping[str, Any], command: str) -> dict[str, Any]:
    """The image's table with ``row`` in place of any row for the same key (experts, n, hidden, top_k, scales,
    device): what the layer's ``tuned/fused_moe_dispatch.json`` holds."""

    def key(r: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(r[f] for f in _KEY_FIELDS)

    rows = [r for r in shipped.get("rows", []) if key(r) != key(row)]
    return {
        "about": "The image's dispatch table with this GPU's row for the served shape, measured by the command "
        f"below ({MIN_SPEEDUP}x rule, uniform and hot routing; kernels/tuning/dispatch_rows.py). Do not edit by hand.",
        "command": command,
        "source": "bake-time tune",
        "min_speedup": MIN_SPEEDUP,
        "rows": [*rows, dict(row)],
    }
