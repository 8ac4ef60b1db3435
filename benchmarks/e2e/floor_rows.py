"""Each row against its HBM floor (benchmarks/e2e/hbm_floor.py), and whether the row may be published.

A row whose median TPOT is under the least time its routing lets a decode step take (the bytes it must read ÷ the
HBM read bandwidth measured on the run's GPU) measured something impossible: it is flagged BELOW_FLOOR in the CSV
and in the table, and never published. Rows under the dummy weights' own routing at concurrency >= 2 measure a
regime no trained model is in: a labelled control, never published either.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.e2e import hbm_floor
from benchmarks.e2e.routing import CONTROL_ROUTING

BELOW_FLOOR = "BELOW_FLOOR"
_MEASURE = "from tools.measure import hbm_read_gbs as m; print(repr(m() * 1e9))"  # the lab's one probe


def measure_bandwidth(env: Mapping[str, str], timeout_s: float = 120.0) -> tuple[float | None, str]:
    """(the GPU's HBM read bandwidth in bytes/s, measured in a subprocess before any engine holds the GPU, or None;
    a line saying what happened)."""
    try:
        done = subprocess.run([sys.executable, "-c", _MEASURE], env=dict(env), capture_output=True, text=True,
                              timeout=timeout_s)  # fmt: skip
    except subprocess.TimeoutExpired:
        return None, f"HBM read bandwidth: not measured (over {timeout_s:.0f} s)"
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return None, f"HBM read bandwidth: not measured (rc {done.returncode}: {done.stderr.strip()[-200:]})"
    value = float(lines[-1])
    return value, f"HBM read bandwidth: {value / 1e12:.2f} TB/s (tools/measure.py)"


def single_gpu(split: str) -> bool:
    """Whether the row's engine runs on one GPU ('' or 'tp1'): the measured bandwidth is one GPU's, and a split
    reads each rank's shard in parallel, which this floor does not model yet."""
    return split in ("", "tp1")


def add_floor_checks(
    rows: Sequence[dict[str, Any]], model_dir: Path, routing: str, hbm_bytes_per_s: float | None
) -> None:
    """Fill hbm_read_tbps, floor_tpot_ms, floor_fraction (floor ÷ median TPOT) and floor_check in each row of one
    model. Without a measured bandwidth, or for a model whose geometry the floor cannot read, the columns stay
    empty and floor_check says why."""
    if hbm_bytes_per_s is None:
        for row in rows:
            row["floor_check"] = "no floor (no bandwidth measured, a split or fewer layers)"
        return
    try:
        geometry = hbm_floor.geometry_from_model_dir(model_dir)
    except ValueError as exc:
        for row in rows:
            row["floor_check"] = f"no floor: {exc}"[:160]
        return
    for row in rows:
        row["hbm_read_tbps"] = hbm_bytes_per_s / 1e12
        # a request's decode steps read its prompt's KV and, on average, half of its own output's
        context = int(row["input_len"]) + int(row["output_len"]) // 2
        # the resolver keeps vLLM's KV cache dtype (the model's: bf16); a user's fp8 cache halves what it reads
        kv_bytes = 1 if "kv_cache_dtype=fp8" in str(row.get("options") or "") else 2
        floor = hbm_floor.decode_floor(geometry, routing=routing, conc=int(row["conc"]), context_len=context,
                                       hbm_bytes_per_s=hbm_bytes_per_s, kv_bytes_per_elem=kv_bytes)  # fmt: skip
        row["floor_tpot_ms"] = floor.tpot_ms
        tpot = row.get("tpot_ms_median")
        fraction, check = hbm_floor.floor_check(math.nan if tpot in (None, "") else float(tpot), floor)
        row["floor_fraction"], row["floor_check"] = fraction, check


def publication(row: dict[str, Any]) -> tuple[bool, str]:
    """(whether the table shows the row's figures, the label its status column gets: '' for a published row)."""
    if row.get("floor_check") == BELOW_FLOOR:
        return False, "below the HBM floor: not published"
    if row.get("routing") == CONTROL_ROUTING and int(row.get("conc") or 0) >= 2:
        return True, "control (dummy routing): not published"
    return True, ""
