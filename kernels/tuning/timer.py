"""The one GPU timer of the project, and what a measurement records about its machine.

- ``graph_us(run_all, calls=R)``: ``run_all`` (issuing R kernel calls) is captured once in a CUDA graph and the
  graph is replayed between CUDA events; the result is the median over ``batches`` of µs per call. A graph keeps
  launch gaps out of the figure; callers that rotate R different inputs per graph (the MoE tuner and benchmarks)
  keep the weights streaming from HBM instead of L2.
- ``versions()`` / ``gpu_name()``: the package versions and GPU a tuned file or a benchmark row was made with.

Shipped with the image (kernels/): `python -m entrypoint tune` and `bake-cache` time tiles with it on the serving
GPU. The lab's tools/measure.py re-exports these and adds the HBM probe and the benchmark row preamble. torch is
imported inside the functions, so importing this module needs no GPU stack.
"""

from __future__ import annotations

import importlib
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
