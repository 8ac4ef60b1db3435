"""Is a row's decode step set by the engine's host thread rather than by the GPU? (issue 31, 2026-12-06)

At one request Nemotron-3-Nano's busiest engine thread ran at 97-99 % of a core in every repetition, and its TPOT
followed the host's speed: the plan over LMI-equivalent swung 0.86-1.17 over four runs while their GPU work differed
by 1.5 % (docs/results/nemotron.md). Qwen3-30B-A3B's rows at 16-128 requests ran that thread at 41-56 % and held
0.1-3 % spreads. A row whose busiest engine thread used at least HOST_BOUND_PCT of a core (median over its
repetitions) is flagged `host_bound`: its ratio to another engine measures the host's speed as much as the engines.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

HOST_BOUND_PCT = 95.0  # Nemotron at 1-4 requests: 96-99 %; Qwen3 at one request: 59-91 % (2026-12-05e, 06)


def engine_thread_pct(events: Iterable[dict[str, Any]]) -> float | None:
    """The busiest engine thread's share of one core, median over a row's sample events (host_meter's
    engine_top_thread_cpu_s over the batch's wall_s); None where no event carries it (the offline engine, or a
    meter that read no thread)."""
    shares = [
        100.0 * float(e["engine_top_thread_cpu_s"]) / float(e["wall_s"])
        for e in events
        if (e.get("engine_top_thread_cpu_s") or 0) > 0 and (e.get("wall_s") or 0) > 0
    ]
    return statistics.median(shares) if shares else None


def columns(events: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The row's engine_thread_pct and host_bound ('yes' / 'no'; '' where the share is unknown)."""
    pct = engine_thread_pct(events)
    return {"engine_thread_pct": pct, "host_bound": "" if pct is None else ("yes" if pct >= HOST_BOUND_PCT else "no")}


def label(row: dict[str, Any]) -> str:
    """The table's word on a host-bound row, '' otherwise."""
    if row.get("host_bound") != "yes":
        return ""
    return f"host-bound (engine thread {float(row['engine_thread_pct']):.0f} % of a core)"


def verdict_suffix(row: dict[str, Any], baseline: dict[str, Any]) -> str:
    """Appended to a ratio's verdict when either side was host-bound: the ratio then carries the host's speed."""
    return " (host-bound)" if "yes" in (row.get("host_bound"), baseline.get("host_bound")) else ""
