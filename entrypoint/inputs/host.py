"""Probes of the machine the plan runs on, for the CPU engine's worker processes (entrypoint.resolve.cpu_parallel).

Read here, in the input code, so the resolver stays a pure function of what was found.
"""

from __future__ import annotations

import os
import shutil

from entrypoint.resolve.cpu_parallel import CpuHost

SHM_PATH = "/dev/shm"


def probe_cpu_host(shm_path: str = SHM_PATH) -> CpuHost:
    """The CPUs this process may run on (its affinity mask: a container's --cpuset-cpus, taskset) and the free bytes
    of /dev/shm, as vLLM measures them (shutil.disk_usage, vllm/distributed/device_communicators/shm_broadcast.py)."""
    cpus = tuple(sorted(os.sched_getaffinity(0)))
    free = shutil.disk_usage(shm_path).free if os.path.isdir(shm_path) else None
    return CpuHost(cpus=cpus, shm_free_bytes=free)
