"""option.node_role and the LeaderWorkerSet variables → one node's `vllm serve` flags (entrypoint.resolve.multinode).

The argv of vLLM's multi-node data parallel (https://docs.vllm.ai/en/latest/serving/data_parallel_deployment/):
the head without a start rank, each worker `--headless` from rank k*L; explicit options beat the LWS variables.
"""

from __future__ import annotations

import pytest

from entrypoint.config.node_role import NodeRole, parse_node_role
from entrypoint.config.settings import Settings
from entrypoint.config_resolver import resolve
from entrypoint.model.types import ModelDescription, MoEShape
from entrypoint.resolve.cpu_parallel import MIB, CpuHost
from entrypoint.resolve.engine_args import build_engine_args
from entrypoint.resolve.gpu import simulate_gpus
from entrypoint.resolve.multinode import HEADLESS, plan_node
from entrypoint.resolve.vllm_caps import PINNED_VLLM_VERSION, load_snapshot
from entrypoint.utils.errors import ConfigError

CAPS = load_snapshot(PINNED_VLLM_VERSION)
H200 = simulate_gpus("H200", 8)
LWS = {"LWS_LEADER_ADDRESS": "10.1.2.3", "LWS_GROUP_SIZE": "2"}


def node(options: dict[str, str], environ: dict[str, str], gpus=H200):
    settings = Settings.from_options(options)
    engine = build_engine_args(settings.options, {}, CAPS, gpus)
    return plan_node(settings, engine, gpus, environ)


def flags(args: tuple[str, ...]) -> dict[str, str | None]:
    """--a 1 --b --c 2 → {"--a": "1", "--b": None, "--c": "2"}."""
    out: dict[str, str | None] = {}
    for i, arg in enumerate(args):
        if arg.startswith("--"):
            nxt = args[i + 1] if i + 1 < len(args) else None
            out[arg] = None if nxt is None or nxt.startswith("--") else nxt
    return out


def test_no_role_and_no_lws_is_one_node_with_nothing_added() -> None:
    found = node({}, {})
    assert (found.role, found.args, found.reasons) == (NodeRole.SINGLE, (), ())


def test_lws_leader_is_the_head_without_a_start_rank() -> None:
    found = node({"tensor_parallel_degree": "8"}, {**LWS, "LWS_WORKER_INDEX": "0"})
    assert found.role is NodeRole.HEAD and not found.headless
    assert flags(found.args) == {
        "--data-parallel-size-local": "1",  # 8 GPUs / TP 8
        "--data-parallel-size": "2",
        "--data-parallel-address": "10.1.2.3",
        "--data-parallel-rpc-port": "29550",
    }
    assert (
        found.reasons[0]
        == "node_role: head (auto: LWS_WORKER_INDEX=0 from a LeaderWorkerSet; docs/deployment.md#multi-node)"
    )


def test_lws_worker_runs_headless_from_rank_k_times_local() -> None:
    found = node({"tensor_parallel_degree": "2"}, {**LWS, "LWS_GROUP_SIZE": "3", "LWS_WORKER_INDEX": "2"})
    assert found.role is NodeRole.WORKER and found.headless
    assert flags(found.args) == {
        "--data-parallel-size-local": "4",  # 8 GPUs / TP 2
        "--data-parallel-size": "12",
        "--data-parallel-address": "10.1.2.3",
        "--data-parallel-rpc-port": "29550",
        "--data-parallel-start-rank": "8",
        HEADLESS: None,
    }
    assert (found.dp_size, found.dp_local) == (12, 4)


def test_explicit_options_beat_lws_and_are_not_repeated() -> None:
    options = {"node_role": "head", "data_parallel_address": "192.0.2.7", "data_parallel_rpc_port": "13345"}
    found = node(options, {**LWS, "LWS_WORKER_INDEX": "1"})  # the role option wins over index 1 too
    assert found.role is NodeRole.HEAD
    assert "--data-parallel-address" not in found.args  # the engine flags already carry the user's value
    assert (
        "data_parallel_address: 192.0.2.7 (option.data_parallel_address, over the LWS value 10.1.2.3)" in found.reasons
    )


def test_single_ignores_lws() -> None:
    assert node({"node_role": "single"}, {**LWS, "LWS_WORKER_INDEX": "1"}).args == ()


def test_a_worker_without_lws_needs_every_value() -> None:
    options = {"node_role": "worker", "data_parallel_size": "2", "data_parallel_address": "127.0.0.1"}
    with pytest.raises(ConfigError) as err:
        node(options, {})
    assert err.value.key == "option.data_parallel_start_rank" and "node_role=worker needs it" in err.value.reason
    found = node({**options, "data_parallel_start_rank": "1"}, {}, gpus=simulate_gpus("cpu"))
    assert found.args == ("--data-parallel-size-local", "1", "--data-parallel-rpc-port", "29550", HEADLESS)


HEAD = {"node_role": "head", "data_parallel_size": "2", "data_parallel_address": "a"}
WORKER = {**HEAD, "node_role": "worker"}


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"node_role": "head", "data_parallel_size": "2"}, "option.data_parallel_address"),
        ({"node_role": "head", "data_parallel_address": "127.0.0.1"}, "option.data_parallel_size"),
        ({**HEAD, "data_parallel_start_rank": "0"}, "option.data_parallel_start_rank"),  # would be hybrid LB
        ({**WORKER, "data_parallel_start_rank": "0"}, "option.data_parallel_start_rank"),  # rank 0 is the head's
        ({**WORKER, "data_parallel_start_rank": "2"}, "option.data_parallel_start_rank"),  # past the last rank
    ],
)
def test_a_role_that_cannot_connect_is_refused(options: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        node(options, {}, gpus=simulate_gpus("cpu"))
    assert err.value.key == key


def test_a_bad_lws_variable_is_refused_by_name() -> None:
    with pytest.raises(ConfigError) as err:
        node({}, {**LWS, "LWS_WORKER_INDEX": "one"})
    assert err.value.key == "LWS_WORKER_INDEX"


@pytest.mark.parametrize(("text", "role"), [(None, NodeRole.AUTO), ("Head", NodeRole.HEAD), ("leader", NodeRole.HEAD),
                                            ("headless", NodeRole.WORKER), ("worker", NodeRole.WORKER)])  # fmt: skip
def test_node_role_spellings(text: str | None, role: NodeRole) -> None:
    assert parse_node_role(text) is role


def test_an_unknown_node_role_lists_the_accepted_ones() -> None:
    with pytest.raises(ConfigError) as err:
        parse_node_role("boss")
    assert err.value.accepted == "auto, single, head, worker, headless, leader"


def test_option_headless_is_refused_pointing_at_node_role() -> None:
    with pytest.raises(ConfigError, match="option.node_role=worker"):
        build_engine_args({"headless": "true"}, {}, CAPS, H200)


# ------------------------------------------------------------------------------------ the whole plan

TINY_MOE = ModelDescription(
    source="tiny", architectures=("Qwen3MoeForCausalLM",),
    moe=MoEShape(num_experts=8, top_k=2, hidden_size=128, expert_intermediate_size=64),
)  # fmt: skip
# vLLM 0.32's CPU engine runs data parallel on dense models only (entrypoint.resolve.cpu_parallel)
DENSE = ModelDescription(source="tiny-dense", architectures=("Qwen3ForCausalLM",))


def test_a_cpu_worker_plan_is_headless_bound_and_warms_nothing_up() -> None:
    settings = Settings.from_options({"tensor_parallel_degree": "2"})
    host = CpuHost(cpus=(0, 1, 2, 3), shm_free_bytes=1024 * MIB)
    found = resolve(settings, DENSE, simulate_gpus("cpu"), CAPS, environ={**LWS, "LWS_WORKER_INDEX": "1"}, host=host)
    assert found.node_role == "worker"
    args = found.vllm_args
    assert HEADLESS in args and args[args.index("--data-parallel-start-rank") + 1] == "1"
    assert found.env["VLLM_CPU_OMP_THREADS_BIND"] == "0|1"  # one engine of TP 2 on this node; 2 CPUs left over
    assert found.env["MOE_WARMUP"] == "off"
    with pytest.raises(ConfigError, match="headless"):
        resolve(Settings.from_options({"warmup": "on", "node_role": "worker", "data_parallel_size": "2",
                                       "data_parallel_address": "h", "data_parallel_start_rank": "1"}),
                DENSE, simulate_gpus("cpu"), CAPS, host=host)  # fmt: skip


def test_a_moe_worker_on_the_cpu_engine_is_refused_naming_the_lws_size() -> None:
    with pytest.raises(ConfigError) as err:
        resolve(Settings(), TINY_MOE, simulate_gpus("cpu"), CAPS, environ={**LWS, "LWS_WORKER_INDEX": "1"})
    assert err.value.key == "LWS_GROUP_SIZE" and "all_gatherv" in err.value.reason


def test_on_gpus_a_moe_worker_plan_is_made() -> None:
    found = resolve(Settings(), TINY_MOE, H200, CAPS, environ={**LWS, "LWS_WORKER_INDEX": "1"})
    assert found.node_role == "worker" and HEADLESS in found.vllm_args
    assert "--data-parallel-start-rank" in found.vllm_args and "VLLM_CPU_OMP_THREADS_BIND" not in found.env
