"""The CPU engine with several worker processes: one CPU range per rank, the /dev/shm floor, expert parallel refused.

Pure cases through entrypoint.resolve.cpu_parallel, then the whole resolver on the tiny MoE model's config with a
CpuHost as entrypoint.inputs.host would probe it, then that probe on this machine.
"""

from __future__ import annotations

import os

import pytest

from entrypoint.config.settings import Settings
from entrypoint.config_resolver import resolve
from entrypoint.inputs.host import probe_cpu_host
from entrypoint.model.types import ModelDescription, MoEShape
from entrypoint.resolve.cpu_parallel import (
    BIND_ENV,
    MIB,
    CpuHost,
    cpu_parallel,
    cpu_ranges,
    shm_needed_mib,
    split_cpus,
)
from entrypoint.resolve.gpu import simulate_gpus
from entrypoint.resolve.vllm_caps import PINNED_VLLM_VERSION, load_snapshot
from entrypoint.utils.errors import ConfigError

CAPS = load_snapshot(PINNED_VLLM_VERSION)
TINY_MOE = ModelDescription(
    source="tiny", architectures=("Qwen3MoeForCausalLM",),
    moe=MoEShape(num_experts=8, top_k=2, hidden_size=128, expert_intermediate_size=64),
)  # fmt: skip
DENSE = ModelDescription(source="tiny-dense", architectures=("Qwen3ForCausalLM",))
BIG_SHM = CpuHost(cpus=tuple(range(16)), shm_free_bytes=4096 * MIB)
KEY, VALUE = "option.tensor_parallel_degree", "2"


@pytest.mark.parametrize(
    ("cpus", "expected"),
    [
        ([0], "0"),
        ([0, 1, 2, 3], "0-3"),
        ([5, 0, 1, 2], "0-2,5"),  # unsorted, as a cpuset may come
        ([0, 2, 4], "0,2,4"),
    ],
)
def test_cpu_ranges_are_the_syntax_vllm_parses(cpus: list[int], expected: str) -> None:
    assert cpu_ranges(cpus) == expected


@pytest.mark.parametrize(
    ("cpus", "ranks", "slices", "unbound"),
    [
        (range(2), 2, [[0], [1]], []),  # 2 CPUs, TP=2 (this CI machine): every CPU to a rank
        (range(3), 2, [[0], [1]], [2]),  # an odd CPU stays with the API server
        (range(8), 2, [[0, 1, 2], [3, 4, 5]], [6, 7]),  # 2 CPUs kept back, as vLLM's auto does on x86
        ((4, 5, 6, 7, 12, 13, 14, 15), 4, [[4], [5], [6], [7]], [12, 13, 14, 15]),  # a cpuset with a gap
    ],
)
def test_each_rank_gets_a_disjoint_equal_slice(cpus, ranks: int, slices: list[list[int]], unbound: list[int]) -> None:
    assert split_cpus(list(cpus), ranks) == (slices, unbound)


def test_two_ranks_bind_disjoint_ranges_and_say_why() -> None:
    found = cpu_parallel(2, 1, False, BIG_SHM, {}, KEY, VALUE)
    assert found.env == {BIND_ENV: "0-6|7-13"}
    assert any(r.startswith(f"cpu binding: {BIND_ENV}=0-6|7-13 (2 rank(s) on CPUs 0-15") for r in found.reasons)
    assert all("docs/deployment.md#cpu-engine-workers" in r for r in found.reasons)


def test_a_user_binding_wins_and_is_not_planned() -> None:
    found = cpu_parallel(2, 1, False, BIG_SHM, {BIND_ENV: "0-3|8-11"}, KEY, VALUE)
    assert found.env == {}
    assert "cpu binding: VLLM_CPU_OMP_THREADS_BIND=0-3|8-11 as set in the environment" in found.reasons[0]


def test_one_rank_changes_nothing() -> None:
    assert cpu_parallel(1, 1, False, CpuHost(), {}, KEY, VALUE).env == {}


def test_fewer_cpus_than_ranks_is_refused_naming_the_option() -> None:
    with pytest.raises(ConfigError) as err:
        cpu_parallel(4, 1, False, CpuHost(cpus=(0, 1), shm_free_bytes=4096 * MIB), {}, KEY, "4")
    assert err.value.key == KEY and err.value.value == "4"
    assert "4 ranks" in err.value.reason and "2 CPU(s) (0-1)" in err.value.reason
    assert "at most 2 ranks" in (err.value.accepted or "")


@pytest.mark.parametrize("free_mib", [0, 64, 263])  # 64: Docker's default --shm-size; 264 MiB needed for 2 x 1 CPU
def test_too_little_shared_memory_names_shm_size(free_mib: int) -> None:
    host = CpuHost(cpus=(0, 1), shm_free_bytes=free_mib * MIB)
    with pytest.raises(ConfigError) as err:
        cpu_parallel(2, 1, False, host, {}, KEY, VALUE)
    assert err.value.key == "/dev/shm" and err.value.value == f"{free_mib} MiB free"
    assert f"need at least {shm_needed_mib(2)} MiB" in err.value.reason
    assert "docker run --shm-size 1g" in str(err.value)


def test_just_enough_shared_memory_passes() -> None:
    host = CpuHost(cpus=(0, 1), shm_free_bytes=shm_needed_mib(2) * MIB)
    assert cpu_parallel(2, 1, False, host, {}, KEY, VALUE).env == {BIND_ENV: "0|1"}


def test_expert_parallel_is_refused_on_the_cpu_engine_whatever_the_size() -> None:
    for ranks in (1, 2):
        with pytest.raises(ConfigError) as err:
            cpu_parallel(ranks, 1, True, BIG_SHM, {}, KEY, VALUE)
        assert err.value.key == "option.enable_expert_parallel" and "expert map" in err.value.reason


# ------------------------------------------------------------------------------------ through the resolver


def plan(options: dict[str, str], host: CpuHost | None, model: ModelDescription = TINY_MOE):
    return resolve(Settings.from_options(options), model, simulate_gpus("cpu"), CAPS, host=host)


def test_tp2_on_the_cpu_engine_plans_the_binding() -> None:
    found = plan({"tensor_parallel_degree": "2"}, CpuHost(cpus=(0, 1), shm_free_bytes=4096 * MIB))
    assert "--tensor-parallel-size" in found.vllm_args and found.env[BIND_ENV] == "0|1"


def test_tp2_with_dockers_default_shm_exits_with_the_shm_size_hint() -> None:
    with pytest.raises(ConfigError, match=r"--shm-size 1g"):
        plan({"tensor_parallel_degree": "2"}, CpuHost(cpus=(0, 1), shm_free_bytes=64 * MIB))


def test_data_parallel_of_a_dense_model_counts_local_engines_times_tp() -> None:
    host = CpuHost(cpus=tuple(range(8)), shm_free_bytes=4096 * MIB)
    found = plan({"tensor_parallel_degree": "2", "data_parallel_size": "2"}, host, DENSE)
    assert found.env[BIND_ENV] == "0|1|2|3"  # vLLM slices DP x TP entries by the local DP rank
    with pytest.raises(ConfigError) as err:
        plan({"data_parallel_size": "4"}, CpuHost(cpus=(0, 1), shm_free_bytes=4096 * MIB), DENSE)
    assert err.value.key == "option.data_parallel_size" and "4 ranks" in err.value.reason


def test_data_parallel_of_a_moe_model_is_refused_on_the_cpu_engine() -> None:
    # seen in the image: head + headless worker started, /ping 200, then NotImplementedError from all_gatherv
    with pytest.raises(ConfigError) as err:
        plan({"data_parallel_size": "2"}, BIG_SHM)
    assert err.value.key == "option.data_parallel_size" and "all_gatherv" in err.value.reason


def test_the_probe_reads_this_process_affinity_and_shm() -> None:
    host = probe_cpu_host()
    assert host.cpus == tuple(sorted(os.sched_getaffinity(0)))
    assert host.shm_free_bytes is None or host.shm_free_bytes >= 0
    assert probe_cpu_host("/nonexistent-shm").shm_free_bytes is None
