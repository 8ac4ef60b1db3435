"""option.node_role → the `vllm serve` flags of one node of a multi-node data-parallel deployment, each with its reason.

vLLM's own multi-node serving (https://docs.vllm.ai/en/latest/serving/data_parallel_deployment/): the head runs
the API server and `--data-parallel-size-local` engines; every other node runs `--headless` engines that connect to
the head's `--data-parallel-address:--data-parallel-rpc-port`, numbered from `--data-parallel-start-rank`. A
LeaderWorkerSet gives each pod LWS_LEADER_ADDRESS, LWS_GROUP_SIZE and LWS_WORKER_INDEX (0 = leader); `auto` maps them:
- head (index 0): --data-parallel-size G*L --data-parallel-size-local L --data-parallel-address A
                  --data-parallel-rpc-port R
- worker k:       the same, plus --headless --data-parallel-start-rank k*L
A user's option.data_parallel_* always beats what the LWS variables say. The head never gets a start rank: without
--headless vLLM 0.32 reads one as "hybrid load balancing" (vllm/engine/arg_utils.py, `data_parallel_start_rank is
not None and not headless`). `--headless` is a flag of `vllm serve`, not an engine argument, so it is added here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from entrypoint.config.node_role import NodeRole
from entrypoint.config.settings import Settings
from entrypoint.resolve.engine_args import EngineArgs, flag
from entrypoint.resolve.gpu_types import GpuInventory
from entrypoint.utils.errors import ConfigError

DOC = "docs/deployment.md#multi-node"
LWS_ADDRESS = "LWS_LEADER_ADDRESS"
LWS_SIZE = "LWS_GROUP_SIZE"
LWS_INDEX = "LWS_WORKER_INDEX"
# vLLM 0.32's default (vllm/config/parallel.py, data_parallel_rpc_port); passed explicitly so head and workers agree
DEFAULT_RPC_PORT = 29550
HEADLESS = "--headless"


@dataclass(frozen=True)
class NodePlan:
    """One node's part: its role, the flags to add to the engine's, the data-parallel sizes the rest of the plan
    counts with (the CPU binding, the warm-up), and one reason line per automatic decision."""

    role: NodeRole = NodeRole.SINGLE
    args: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    dp_size: int = 1
    dp_local: int = 1

    @property
    def headless(self) -> bool:
        return self.role is NodeRole.WORKER


def _lws_int(environ: Mapping[str, str], name: str, minimum: int) -> int | None:
    raw = environ.get(name, "").strip()
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit()) or int(raw) < minimum:
        raise ConfigError(name, raw, f"a LeaderWorkerSet variable must be an integer >= {minimum}", f"{minimum}, ...")
    return int(raw)


def _role(settings: Settings, environ: Mapping[str, str]) -> tuple[NodeRole, str | None]:
    if settings.node_role is not NodeRole.AUTO:
        return settings.node_role, None
    index = _lws_int(environ, LWS_INDEX, 0)
    if index is None:
        return NodeRole.SINGLE, None
    role = NodeRole.HEAD if index == 0 else NodeRole.WORKER
    return role, f"node_role: {role} (auto: {LWS_INDEX}={index} from a LeaderWorkerSet; {DOC})"


def _int_option(engine: EngineArgs, name: str) -> int | None:
    value = engine.values.get(name)
    return None if value is None else int(value)


def plan_node(
    settings: Settings, engine: EngineArgs, gpus: GpuInventory, environ: Mapping[str, str]
) -> NodePlan:  # fmt: skip
    """The node's role and flags. Raises ConfigError where a head or worker lacks what vLLM needs to connect."""
    role, role_reason = _role(settings, environ)
    if role is NodeRole.SINGLE:
        size = _int_option(engine, "data_parallel_size") or 1
        return NodePlan(dp_size=size, dp_local=_int_option(engine, "data_parallel_size_local") or size)
    label = settings.option_label
    reasons = [role_reason] if role_reason else []
    args: list[str] = []
    lws = LWS_INDEX in environ
    ranks_per_engine = engine.tensor_parallel_size * (_int_option(engine, "pipeline_parallel_size") or 1)

    def pick(name: str, from_lws: int | str | None, default: int | str | None, why: str) -> str:
        """The user's option, else the LWS value, else the default; the flag is added when it is not the user's."""
        if name in engine.values:
            if from_lws is not None and str(from_lws) != engine.values[name]:
                reasons.append(f"{name}: {engine.values[name]} (option.{name}, over the LWS value {from_lws})")
            return engine.values[name]
        value = from_lws if from_lws is not None else default
        if value is None:
            need = f"set option.{name} or run under a LeaderWorkerSet ({LWS_ADDRESS}, {LWS_SIZE}, {LWS_INDEX})"
            raise ConfigError(label(name), "unset", f"node_role={role} needs it: {why}", need)
        args.extend([flag(name), str(value)])
        source = "LWS" if from_lws is not None else "default"
        reasons.append(f"{name}: {value} ({source}: {why}; {DOC})")
        return str(value)

    local_default = max(gpus.count // ranks_per_engine, 1)
    local = int(pick("data_parallel_size_local", None, local_default, "engines on this node"))
    group = _lws_int(environ, LWS_SIZE, 1) if lws else None
    size = int(pick("data_parallel_size", None if group is None else group * local, None, "engines on all nodes"))
    address = environ.get(LWS_ADDRESS, "").strip() or None
    pick("data_parallel_address", address, None, "the head's address, where every engine connects")
    pick("data_parallel_rpc_port", None, DEFAULT_RPC_PORT, "the head's port for the engines, same on every node")
    if role is NodeRole.HEAD:
        if "data_parallel_start_rank" in engine.values:
            raise ConfigError(
                label("data_parallel_start_rank"), engine.values["data_parallel_start_rank"],
                "the head starts at rank 0 and takes no start rank: without --headless vLLM reads one as hybrid load "
                "balancing (an API server on every node)", "unset on the head; set it on workers",
            )  # fmt: skip
        if local > size:
            raise ConfigError(label("data_parallel_size_local"), local, f"more than data_parallel_size={size}")
        return NodePlan(NodeRole.HEAD, tuple(args), tuple(reasons), size, local)
    if local < 1:
        raise ConfigError(label("data_parallel_size_local"), local, "a worker runs at least one engine", "1, 2, ...")
    index = _lws_int(environ, LWS_INDEX, 0) if lws else None
    start_lws = None if index is None else index * local
    start = int(pick("data_parallel_start_rank", start_lws, None, "this node's first engine rank"))
    if start < 1 or start + local > size:
        raise ConfigError(
            label("data_parallel_start_rank"), start,
            f"a worker's engines {start}..{start + local - 1} must lie within 1..{size - 1} (the head holds rank 0, "
            f"data_parallel_size={size})", [str(r) for r in range(1, max(size - local + 1, 2))],
        )  # fmt: skip
    args.append(HEADLESS)
    reasons.append(f"headless: on (node_role=worker: engines only, no API server and no /ping; {DOC})")
    return NodePlan(NodeRole.WORKER, tuple(args), tuple(reasons), size, local)
