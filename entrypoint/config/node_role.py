"""option.node_role, typed: which part of a multi-node vLLM data-parallel deployment this container is.

`auto` (the default) reads a LeaderWorkerSet's variables when they are set (entrypoint.resolve.multinode) and is one
node otherwise; `single` ignores them; `head` runs the API server and its local engines; `worker` runs engines only
(vLLM's `--headless`). Where the role changes the plan: entrypoint.resolve.multinode; docs/deployment.md explains it.
"""

from __future__ import annotations

from enum import StrEnum

from entrypoint.config.moe import parse_choice


class NodeRole(StrEnum):
    AUTO = "auto"
    SINGLE = "single"
    HEAD = "head"
    WORKER = "worker"


# The words LWS and vLLM's docs use for the same roles.
_SPELLINGS = {"leader": NodeRole.HEAD, "headless": NodeRole.WORKER}


def parse_node_role(text: str | None, key: str = "option.node_role") -> NodeRole:
    """The user's option.node_role as a NodeRole; unset or empty is `auto`. `key` names where it was set."""
    return parse_choice(NodeRole, text, key, "unknown node role", _SPELLINGS, sorted(_SPELLINGS))
