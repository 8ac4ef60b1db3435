"""How this project measures on a GPU: the one timer, the HBM read-bandwidth probe, and the row preamble.

- ``graph_us(run_all, calls=R)``: ``run_all`` (issuing R kernel calls) is captured once in a CUDA graph and the
  graph is replayed between CUDA events; the result is the median over ``batches`` of µs per call. A graph keeps
  launch gaps out of the figure; callers that rotate R different inputs per graph (the MoE benchmarks) keep the
  weights streaming from HBM instead of L2.
- ``hbm_read_gbs()``: the read bandwidth of this GPU in this run, the ceiling every "% of floor" column divides by.
- ``run_preamble()``: the columns every benchmark row carries (GPU name, package versions, UTC timestamp), so a
  CSV row says what produced it.

Used by the tuner (tools/tune.py, its provenance), the vLLM harness (tools/moe_harness.py) and every benchmark
under benchmarks/. It lives in tools/ and not in benchmarks/ because the tuner needs the same timer and versions,
and tools never import benchmarks (benchmarks import tools). torch is imported inside the functions: the tuner's
``--write-readme`` and the e2e harness import this module on machines where only the GPU worker has torch.
"""

from __future__ import annotations

import datetime as dt
import importlib
import statistics
import time
from collections.abc import Callable, Iterable

# Replays per timed batch: enough for ~4 ms of GPU work (CUDA event resolution is ~0.5 µs), at most 200.
TARGET_MS = 4.0
MAX_REPS = 200
ABSENT = "absent"


def graph_us(run_all: Callable[[], object], calls: int = 1, batches: int = 5, target_ms: float = TARGET_MS) -> float:
    """Median µs per call: ``run_all()`` (issuing ``calls`` calls) captured in a CUDA graph, replayed.

    ``run_all`` runs once outside the capture first, so JIT compiles and lazy allocations are not captured.
    """
    import torch

    run_all()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run_all()
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    reps = max(1, min(MAX_REPS, int(target_ms / max(start.elapsed_time(end), 1e-3))))
    times = []
    for _ in range(batches):
        start.record()
        for _ in range(reps):
            graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / (reps * calls))
    del graph
    return sorted(times)[len(times) // 2]


def hbm_read_gbs(gib: float = 4, device: str = "cuda", reps: int = 20) -> float:
    """Read bandwidth in GB/s: the median over ``reps`` of summing a ``gib`` GiB fp32 buffer of random values (a
    read-only stream far larger than L2; random, so no compression can flatter it), after 3 warm-ups, timed with CUDA
    events on a GPU (a wall clock elsewhere, for tests). The one probe of the lab: the kernel benches' "% of floor"
    columns and the end-to-end HBM floor (benchmarks/e2e/hbm_floor.py) both divide by it.

    Until 2026-12-04 the kernel benches used a bf16 max-reduction here. On the H200 it read 3,474 GB/s where this
    sum read 4,306 GB/s on the same machine minutes later, so "% of floor" figures of kernel runs before that date
    are ~1.24x too high (docs/results/our-kernel.md)."""
    import torch

    buffer = torch.rand(int(gib * (1 << 30)) // 4, dtype=torch.float32, device=device)
    nbytes = buffer.numel() * buffer.element_size()
    on_cuda = torch.device(device).type == "cuda"
    for _ in range(3):
        buffer.sum()
    seconds = []
    for _ in range(reps):
        if on_cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            buffer.sum()
            end.record()
            end.synchronize()
            seconds.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            buffer.sum()
            seconds.append(time.perf_counter() - t0)
    del buffer
    return nbytes / statistics.median(seconds) / 1e9


def versions(packages: Iterable[str]) -> dict[str, str]:
    """``{package: __version__}``; a package that does not import here reads "absent" (the row says so)."""
    found = {}
    for name in packages:
        try:
            found[name] = str(importlib.import_module(name).__version__)
        except Exception:  # not installed, or broken on this host: a fact for the row, not a crash
            found[name] = ABSENT
    return found


def gpu_name() -> str:
    """``torch.cuda.get_device_name()``, or "cpu" where no GPU is visible."""
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


def utc_timestamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_preamble(packages: Iterable[str] = ("torch", "triton", "vllm")) -> dict[str, str]:
    """The columns every benchmark row starts from: ``gpu``, one per package version, ``timestamp``."""
    return {"gpu": gpu_name(), **versions(packages), "timestamp": utc_timestamp()}
