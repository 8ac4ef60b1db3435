"""More than one engine worker on vLLM's CPU engine: which CPUs each rank binds, /dev/shm, expert parallel.

vLLM 0.32's CPU engine runs one `CPUWorker` process per rank (tensor × pipeline × local data parallel) and binds each
to CPUs from VLLM_CPU_OMP_THREADS_BIND (vllm/utils/ompmultiprocessing.py). Its default, `auto`, gives rank N the CPUs of
NUMA node N and stops with an assertion when the container sees fewer NUMA nodes than ranks, which is the case in most
containers; so the plan always writes an explicit list: the CPUs this process may use (os.sched_getaffinity, probed by
entrypoint.inputs.host), split into one disjoint range per rank. The ranks talk through POSIX shared memory: vLLM's
message rings are checked against /dev/shm's free space at engine start (up to 240 MiB each,
vllm/distributed/device_communicators/shm_broadcast.py `check_shm_free_space`) and the all-reduce maps 4 MiB per
thread per rank (csrc/cpu/shm.cpp upstream); Docker's default /dev/shm is 64 MiB. The resolver stays pure: the probes
arrive as a CpuHost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from entrypoint.utils.errors import ConfigError

DOC = "docs/deployment.md#cpu-engine-workers"
BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"
SIM_NUMA_ENV = "VLLM_CPU_SIM_MULTI_NUMA"
MIB = 1 << 20
# The largest ring vLLM 0.32 preflights: a worker's response queue, 10 chunks of 24 MiB (MessageQueue(1, 1),
# vllm/v1/executor/multiproc_executor.py), rounded up with its metadata.
SHM_RING_MIB = 256
# The CPU all-reduce's buffer per OpenMP thread of each rank (PER_THREAD_SHM_BUFFER_BYTES, csrc/cpu/shm.cpp).
SHM_PER_THREAD_MIB = 4
# What the docs and the error recommend: room for the rings, the all-reduce and a burst of requests.
RECOMMENDED_SHM = "1g"


@dataclass(frozen=True)
class CpuHost:
    """What the planning process sees of its machine (entrypoint.inputs.host): the CPUs it may run on and the free
    space of /dev/shm (None: no /dev/shm)."""

    cpus: tuple[int, ...] = ()
    shm_free_bytes: int | None = None


@dataclass(frozen=True)
class CpuParallel:
    env: dict[str, str]
    reasons: tuple[str, ...]


def cpu_ranges(cpus: Sequence[int]) -> str:
    """[0, 1, 2, 5] → "0-2,5", the list syntax vLLM parses (vllm/utils/cpu_resource_utils.py parse_id_list)."""
    parts: list[str] = []
    ordered = sorted(cpus)
    start = prev = ordered[0]
    for cpu in [*ordered[1:], None]:
        if cpu is not None and cpu == prev + 1:
            prev = cpu
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if cpu is not None:
            start = prev = cpu
    return ",".join(parts)


def split_cpus(cpus: Sequence[int], ranks: int) -> tuple[list[list[int]], list[int]]:
    """One disjoint, equal slice of `cpus` per rank, and the CPUs left unbound for the API server and the scheduler.

    As vLLM's `auto` does on x86, `ranks` CPUs stay unbound when every rank still keeps at least one; with fewer CPUs
    (a 2-CPU machine at TP=2) every CPU goes to a rank and the other processes share them."""
    ordered = sorted(cpus)
    reserved = ranks if len(ordered) >= 2 * ranks else 0
    per_rank = (len(ordered) - reserved) // ranks
    slices = [ordered[i * per_rank : (i + 1) * per_rank] for i in range(ranks)]
    return slices, ordered[ranks * per_rank :]


def _binding(ranks: int, host: CpuHost, environ: Mapping[str, str], key: str, value: str) -> tuple[dict, str, int]:
    """(env, reason, CPUs bound in all) for VLLM_CPU_OMP_THREADS_BIND."""
    if environ.get(BIND_ENV) or environ.get(SIM_NUMA_ENV, "0") != "0":
        name = BIND_ENV if environ.get(BIND_ENV) else SIM_NUMA_ENV
        return {}, f"cpu binding: {name}={environ[name]} as set in the environment (not planned; {DOC})", len(host.cpus)
    if len(host.cpus) < ranks:
        raise ConfigError(
            key, value,
            f"the CPU engine binds each of its {ranks} ranks (tensor x pipeline x local data parallel) to CPUs of its "
            f"own, and this container may use {len(host.cpus)} CPU(s) ({cpu_ranges(host.cpus) if host.cpus else '-'})",
            f"at most {len(host.cpus)} ranks, more CPUs (docker run --cpus / --cpuset-cpus), or {BIND_ENV}",
        )  # fmt: skip
    slices, unbound = split_cpus(host.cpus, ranks)
    bind = "|".join(cpu_ranges(s) for s in slices)
    left = f"{cpu_ranges(unbound)} left to the API server" if unbound else "none left unbound"
    reason = f"cpu binding: {BIND_ENV}={bind} ({ranks} rank(s) on CPUs {cpu_ranges(host.cpus)}, {left}; {DOC})"
    return {BIND_ENV: bind}, reason, sum(len(s) for s in slices)


def shm_needed_mib(bound_cpus: int) -> int:
    return SHM_RING_MIB + SHM_PER_THREAD_MIB * bound_cpus


def refuse_moe_data_parallel(dp_size: int, dp_key: str) -> None:
    """vLLM 0.32's CPU engine starts a MoE model data-parallel, then fails its first request: the MoE layers' DP
    dispatch calls all_gatherv, which CpuCommunicator does not implement (DeviceCommunicatorBase raises
    NotImplementedError, vllm/distributed/device_communicators/base_device_communicator.py). vLLM's own CPU CI runs
    data parallel on a dense model only."""
    raise ConfigError(
        dp_key, str(dp_size),
        "vLLM 0.32's CPU engine cannot run a MoE model data-parallel: its CPU communicator lacks all_gatherv, which "
        "the MoE layers' data-parallel dispatch needs (/ping says 200, then every request fails); docs/deployment.md",
        "1 on the CPU engine (tensor_parallel_degree works), or NVIDIA GPUs",
    )  # fmt: skip


def cpu_parallel(
    ranks: int,
    dp_size: int,
    expert_parallel: bool,
    host: CpuHost | None,
    environ: Mapping[str, str],
    key: str,
    value: str,
) -> CpuParallel:
    """The CPU engine's env and reasons for `ranks` local worker processes (out of dp_size data-parallel engines);
    `key`/`value` name the option an error should point at. Raises ConfigError where vLLM would fail at start."""
    if expert_parallel:
        raise ConfigError(
            "option.enable_expert_parallel", "true",
            "vLLM 0.32's CPU MoE kernels ignore the expert map (cpu_fused_moe is called without it, "
            "vllm/model_executor/layers/fused_moe/experts/cpu_moe.py), so each rank would compute experts it does not "
            "hold; expert parallel runs on NVIDIA GPUs",
            "false on the CPU engine",
        )  # fmt: skip
    if ranks <= 1 and dp_size <= 1:
        return CpuParallel({}, ())
    if host is None:
        return CpuParallel({}, (f"cpu binding: not planned, this plan was made without probing its machine ({DOC})",))
    env, bind_reason, bound = _binding(ranks, host, environ, key, value)
    need = shm_needed_mib(bound)
    if host.shm_free_bytes is None:
        return CpuParallel(env, (bind_reason, f"shared memory: no /dev/shm to check (needs {need} MiB; {DOC})"))
    free = host.shm_free_bytes // MIB
    if host.shm_free_bytes < need * MIB:
        raise ConfigError(
            "/dev/shm", f"{free} MiB free",
            f"{key}={value} runs {ranks} CPU engine worker(s) that talk through shared memory and need at least "
            f"{need} MiB there (vLLM's message rings and the CPU all-reduce); start the container with "
            f"`docker run --shm-size {RECOMMENDED_SHM}` (or --ipc=host)",
            f"--shm-size {RECOMMENDED_SHM} or more",
        )  # fmt: skip
    shm_reason = f"shared memory: /dev/shm has {free} MiB free, {ranks} rank(s) need {need} MiB ({DOC})"
    return CpuParallel(env, (bind_reason, shm_reason))
