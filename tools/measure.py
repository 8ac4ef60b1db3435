"""How this project measures on a GPU: the one timer, the HBM read-bandwidth probe, and the row preamble.

- ``graph_us``, ``versions``, ``gpu_name``: the image's own (kernels/tuning/timer.py, what `python -m entrypoint tune`
  times tiles with on the serving GPU), re-exported so every benchmark times the same way.
- ``hbm_read_gbs()``: the read bandwidth of this GPU in this run, the ceiling every "% of floor" column divides by.
- ``run_preamble()``: the columns every benchmark row carries (GPU name, package versions, UTC timestamp), so a
  CSV row says what produced it.

torch is imported inside the functions: the e2e harness imports this module on machines where only the GPU worker
has torch.
"""

from __future__ import annotations

import datetime as dt
import statistics
import time
from collections.abc import Iterable

from kernels.tuning.timer import ABSENT, MAX_REPS, TARGET_MS, gpu_name, graph_us, versions

__all__ = [
    "ABSENT",
    "MAX_REPS",
    "TARGET_MS",
    "gpu_name",
    "graph_us",
    "hbm_read_gbs",
    "run_preamble",
    "utc_timestamp",
    "versions",
]


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


def utc_timestamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def file_tag(gpu: str) -> str:
    """A results file's prefix for the GPU that made it: "h200", "h100", else "gpu" (an H100 lease once wrote its
    numbers under h200_ names: absolute GPU times are published from the H200 only, so the name must say)."""
    for tag in ("h200", "h100"):
        if tag in gpu.lower():
            return tag
    return "gpu"


def run_preamble(packages: Iterable[str] = ("torch", "triton", "vllm")) -> dict[str, str]:
    """The columns every benchmark row starts from: ``gpu``, one per package version, ``timestamp``."""
    return {"gpu": gpu_name(), **versions(packages), "timestamp": utc_timestamp()}
