"""Where our fused-MoE kernel beats vLLM's Triton kernel: the dispatch table the engine plugin and the resolver read.

One row per shape as one GPU sees it (local experts E, per-partition expert width N, hidden size K, top-k, the
checkpoint's scale kind, the device), with the token counts M at which ``ops.fused_moe_fp8`` ran faster than vLLM's
``fused_experts`` with this image's tuned tiles on that device. Everywhere else vLLM's kernel runs. Rows come from
H200 measurements through a committed command (``python -m benchmarks.kernels.dispatch_table``); the file is
``kernels/fused_moe_dispatch.json`` and nothing here imports torch or vLLM (the resolver reads it too).

Under CUDA graphs a decode batch runs the graph of the next capture size (1, 2, 4, 8, 16, 24, 32, ...), so the M the
MoE layer sees is a capture size: the benchmark's M grid (1, 2, 4, ..., 256) lands on them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernels.config_files import file_device_name

DISPATCH_FILE = Path(__file__).resolve().parent / "fused_moe_dispatch.json"
# Another table file (a re-measured device, tests): read by the plan (entrypoint.inputs.gather) and by the engine plugin
# in vLLM's processes (entrypoint.moe_plugin), so both see the same table.
TABLE_ENV = "MOE_SERVING_DISPATCH_TABLE"
# The scale kinds our kernel was measured on. "tensor-static": one FP8 scale per expert for the weights and a
# static per-tensor activation scale (native fp8 static, ModelOpt FP8, compressed-tensors tensor/static);
# "block-dynamic": 128x128 block weight scales with dynamic 1x128 activation groups (DeepSeek-V3).
SCALE_KINDS = ("tensor-static", "block-dynamic")
ACTIVATIONS = ("silu", "relu2")
# ops.fused_moe_fp8.MoEKernelConfig's fields that a tune chooses and a row carries (named here: this module imports
# neither torch nor ops; tests/kernels/test_dispatch.py checks the two lists below cover every field of it)
KERNEL_CONFIG_FIELDS = ("pair_mode", "block_n1", "block_n2", "block_k", "split_k", "split_k2", "num_warps",
                        "num_stages", "pdl", "block_m")  # fmt: skip
# its switches that are measured comparisons, never a row's choice: GEMM1 under PDL (the plugin's env switch) and
# the top-k sum by fp32 atomics (not deterministic). 2026-12-06e: a tune wrote them into its row and failed here
COMPARISON_ONLY_FIELDS = ("pdl_gemm1", "atomic_sum")


def table_path(environ: Mapping[str, str]) -> Path:
    """The table file in use: the one TABLE_ENV names, else the shipped one."""
    named = environ.get(TABLE_ENV)
    return Path(named) if named else DISPATCH_FILE


@dataclass(frozen=True)
class DispatchKey:
    """A shape as vLLM's MoE layer holds it on one GPU (w1: (E, 2N or N, K), w2: (E, K, N))."""

    experts: int  # E, local experts (w2.shape[0])
    n: int  # N, per-partition expert width (w2.shape[2])
    hidden: int  # K (w2.shape[1])
    top_k: int
    scales: str  # one of SCALE_KINDS
    device: str  # vLLM's file device name: "NVIDIA_H200"

    @classmethod
    def of(cls, experts: int, n: int, hidden: int, top_k: int, scales: str, device_name: str) -> DispatchKey:
        """The key for a raw device name as torch or NVML report it ("NVIDIA H200 NVL" → NVIDIA_H200)."""
        return cls(experts, n, hidden, top_k, scales, file_device_name(device_name))

    def label(self) -> str:
        return f"E={self.experts},N={self.n},K={self.hidden},top_k={self.top_k},{self.scales},{self.device}"


@dataclass(frozen=True)
class DispatchRow:
    key: DispatchKey
    shape: str  # the benchmark's shape id, e.g. qwen3-30b-a3b:tp1
    activation: str  # one of ACTIVATIONS: the kernel was measured with it
    token_ranges: tuple[tuple[int, int], ...]  # inclusive M ranges where our kernel runs
    # each measured M -> our kernel's config there (ops.fused_moe_fp8.MoEKernelConfig fields), empty where the default
    # heuristic was measured; only a bake-time tune (entrypoint/caches/tune_layer.py) writes configs
    configs: tuple[tuple[int, tuple[tuple[str, int | bool], ...]], ...] = ()

    def kernel_config(self, num_tokens: int) -> dict[str, int | bool] | None:
        """The tuned config for this many tokens: the one measured at the nearest M at or below it, None when the
        default heuristic is what was measured there."""
        best: dict[str, int | bool] | None = None
        for m, fields in self.configs:
            if m <= num_tokens:
                best = dict(fields) or None
        return best

    def uses_project_kernel(self, num_tokens: int, activation: str) -> bool:
        if activation != self.activation:
            return False
        return any(lo <= num_tokens <= hi for lo, hi in self.token_ranges)

    def describe_ranges(self) -> str:
        return ", ".join(f"M={lo}" if lo == hi else f"M={lo}..{hi}" for lo, hi in self.token_ranges) or "none"


def token_ranges(wins: Iterable[tuple[int, bool]]) -> list[list[int]]:
    """Merge winning M values that are neighbours in the measured grid into inclusive [lo, hi] ranges (an M between a
    win and a loss stays with vLLM)."""
    ranges: list[list[int]] = []
    previous_won = False
    for m, won in sorted(wins):
        if won and previous_won:
            ranges[-1][1] = m
        elif won:
            ranges.append([m, m])
        previous_won = won
    return ranges


class DispatchTableError(ValueError):
    """The table file is not what kernels/dispatch.py writes (names the row and the field)."""


def _field(row: Mapping[str, Any], name: str, kind: type, where: str) -> Any:
    value = row.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise DispatchTableError(f"{where}: field {name!r} must be {kind.__name__}, got {value!r}")
    return value


def _ranges(raw: Any, where: str) -> tuple[tuple[int, int], ...]:
    if not isinstance(raw, list):
        raise DispatchTableError(f"{where}: field 'token_ranges' must be a list of [lo, hi], got {raw!r}")
    out = []
    for item in raw:
        ok = isinstance(item, list) and len(item) == 2 and all(type(v) is int for v in item)
        if not ok or not 1 <= item[0] <= item[1]:
            raise DispatchTableError(f"{where}: token range {item!r} must be [lo, hi] with 1 <= lo <= hi")
        out.append((item[0], item[1]))
    return tuple(sorted(out))


def parse_row(raw: Mapping[str, Any], where: str) -> DispatchRow:
    scales = _field(raw, "scales", str, where)
    if scales not in SCALE_KINDS:
        raise DispatchTableError(f"{where}: scales={scales!r}; accepted: {', '.join(SCALE_KINDS)}")
    activation = _field(raw, "activation", str, where)
    if activation not in ACTIVATIONS:
        raise DispatchTableError(f"{where}: activation={activation!r}; accepted: {', '.join(ACTIVATIONS)}")
    key = DispatchKey(
        experts=_field(raw, "experts", int, where),
        n=_field(raw, "n", int, where),
        hidden=_field(raw, "hidden", int, where),
        top_k=_field(raw, "top_k", int, where),
        scales=scales,
        device=_field(raw, "device", str, where),
    )
    ranges = _ranges(raw.get("token_ranges"), where)
    return DispatchRow(key, _field(raw, "shape", str, where), activation, ranges, _configs(raw.get("measured"), where))


def _configs(measured: Any, where: str) -> tuple[tuple[int, tuple[tuple[str, int | bool], ...]], ...]:
    """The ``config`` of each measured entry that has one (a bake-time tune's choice), checked field by field."""
    out = []
    for entry in measured if isinstance(measured, list) else ():
        if not isinstance(entry, dict) or not isinstance(entry.get("m"), int):
            continue  # the measured list is the record of a benchmark; only a tune's configs are read from it
        config = entry.get("config") or {}
        bad = [k for k, v in config.items() if k not in KERNEL_CONFIG_FIELDS or type(v) not in (int, bool)]
        if bad:
            raise DispatchTableError(
                f"{where}: config {config!r} at m={entry.get('m')!r}: fields must be among "
                f"{', '.join(KERNEL_CONFIG_FIELDS)} with int or bool values"
            )
        out.append((entry["m"], tuple(sorted(config.items()))))
    return tuple(sorted(out))


@dataclass(frozen=True)
class DispatchTable:
    source: str  # the file it was read from
    rows: Mapping[DispatchKey, DispatchRow]

    @classmethod
    def from_rows(cls, rows: Iterable[DispatchRow], source: str) -> DispatchTable:
        return cls(source, {row.key: row for row in rows if row.token_ranges})

    @classmethod
    def load(cls, path: Path = DISPATCH_FILE) -> DispatchTable:
        """Read the table; DispatchTableError names the file, row and field when it is malformed."""
        try:
            raw = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise DispatchTableError(f"{path}: cannot read the dispatch table ({exc})") from None
        rows = raw.get("rows") if isinstance(raw, dict) else None
        if not isinstance(rows, list):
            raise DispatchTableError(f"{path}: expected an object with a 'rows' list")
        return cls.from_rows((parse_row(row, f"{path} row {i}") for i, row in enumerate(rows)), str(path))

    def row(self, key: DispatchKey) -> DispatchRow | None:
        """The row for this shape, or None: vLLM's kernel everywhere (rows without a winning M are dropped)."""
        return self.rows.get(key)
