"""What the served engine's host side did during one measured batch: CPU seconds of the API server, of the engine
processes under it, and of the busiest engine thread; and the inter-token latency the engine itself recorded.

Why: one Nemotron-3-Nano engine's repetitions spread 20-54 % at one request, each repetition uniformly fast or slow
(docs/results/nemotron.md). vLLM 0.32 runs a hybrid model's decode with more host work per step than an attention
model's (Mamba metadata for every KV-cache group), and its engine core does all of it in one thread, overlapped with
the GPU only by async scheduling. If that thread is the bottleneck, TPOT follows its speed: its CPU share then
sits near 100 % of a core in the slow repetitions. If the engine's own inter-token latency stays flat while the
client's TPOT moves, the API server or the client is the bottleneck instead.

Both come from the machine itself: /proc (threads of the server's process tree) and the server's Prometheus
`/metrics` (`vllm:inter_token_latency_seconds`, engine-core timestamps).
"""

from __future__ import annotations

import http.client
import os
import re
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
ITL_METRIC = "vllm:inter_token_latency_seconds"
_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{[^}]*\})?\s+(?P<value>[-+0-9.eEinfNa]+)\s*$")


def _stat_fields(path: Path) -> list[str] | None:
    try:
        return path.read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None  # the thread or process ended between the listing and the read


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (not ``pid`` itself), from each process's parent in /proc."""
    parent: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        fields = _stat_fields(stat)
        if fields is not None:
            parent[int(stat.parent.name)] = int(fields[1])
    found, frontier = [], {pid}
    while frontier:
        frontier = {child for child, ppid in parent.items() if ppid in frontier and child not in found}
        found += sorted(frontier)
    return found


def thread_ticks(pid: int) -> dict[int, int]:
    """{thread id: user + system clock ticks} of every thread of process ``pid``."""
    ticks = {}
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        fields = _stat_fields(stat)
        if fields is not None:
            ticks[int(stat.parent.name)] = int(fields[11]) + int(fields[12])
    return ticks


@dataclass(frozen=True)
class TreeTicks:
    server: dict[int, int]  # the API server's threads
    engine: dict[int, int]  # every thread of every process under it (the engine core, its workers)


def tree_ticks(server_pid: int, engine_pids: list[int]) -> TreeTicks:
    engine: dict[int, int] = {}
    for child in engine_pids:
        engine.update(thread_ticks(child))
    return TreeTicks(thread_ticks(server_pid), engine)


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (its own, not its children's)."""
    fields = _stat_fields(Path(f"/proc/{pid}/stat"))
    if fields is None:
        raise ProcessLookupError(pid)
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def cpu_seconds(before: TreeTicks, after: TreeTicks) -> dict[str, float]:
    """CPU seconds between two snapshots: the API server's, the engine processes', and the busiest engine thread's.
    A thread that started in between counts from zero; one that ended in between is missing from ``after`` and
    counts nothing (an undercount: the engine's busy threads live as long as the engine)."""

    def deltas(a: dict[int, int], b: dict[int, int]) -> list[int]:
        return [b[tid] - a.get(tid, 0) for tid in b]

    engine = deltas(before.engine, after.engine)
    return {
        "api_cpu_s": sum(deltas(before.server, after.server)) / CLOCK_TICKS,
        "engine_cpu_s": sum(engine) / CLOCK_TICKS,
        "engine_top_thread_cpu_s": max(engine, default=0) / CLOCK_TICKS,
    }


def parse_histogram_totals(text: str, metric: str) -> tuple[float, int] | None:
    """(sum, count) of a Prometheus histogram over all its label sets; None when the text has no such series."""
    total, count, seen = 0.0, 0, False
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match:
            continue
        if match["name"] == f"{metric}_sum":
            total, seen = total + float(match["value"]), True
        elif match["name"] == f"{metric}_count":
            value = float(match["value"])
            if value != value:  # NaN: the series says nothing
                continue
            count, seen = count + int(value), True
    return (total, count) if seen else None


def itl_totals(port: int, timeout_s: float = 10.0) -> tuple[float, int] | None:
    """The engine's inter-token latency histogram totals from the server's /metrics; None when it does not answer."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        body = response.read().decode(errors="replace")
        return parse_histogram_totals(body, ITL_METRIC) if response.status == 200 else None
    except (OSError, http.client.HTTPException, ValueError):  # a meter must never fail the measured batch
        return None
    finally:
        conn.close()


class BatchMeter:
    """Snapshots around one batch: ``start()`` before it, ``stop()`` after; ``stop`` returns the sample's fields."""

    def __init__(self, server_pid: int | None, port: int) -> None:
        self.server_pid, self.port = server_pid, port
        self._ticks: TreeTicks | None = None
        self._engine_pids: list[int] = []  # found once per batch: the engine's processes live as long as it does
        self._itl: tuple[float, int] | None = None

    def start(self) -> None:
        # the scrape first: the API server's CPU for answering it then falls outside the window
        self._itl = itl_totals(self.port)
        if self.server_pid:
            self._engine_pids = descendants(self.server_pid)
            self._ticks = tree_ticks(self.server_pid, self._engine_pids)

    def stop(self) -> dict[str, float | int | None]:
        out: dict[str, float | int | None] = {}
        if self._ticks is not None and self.server_pid:
            out.update(cpu_seconds(self._ticks, tree_ticks(self.server_pid, self._engine_pids)))
        itl = itl_totals(self.port)
        if self._itl is not None and itl is not None:
            out["server_itl_sum_s"], out["server_itl_count"] = itl[0] - self._itl[0], itl[1] - self._itl[1]
        return out
