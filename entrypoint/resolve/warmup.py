"""option.warmup: whether the server warms itself up before /ping answers 200 (entrypoint.warmup), and why.

`auto` is on for a GPU engine, where vLLM compiles Triton kernels on a shape's first request; off for the CPU engine,
which runs no such kernels; off where several API server processes run, since each would hold only its own /ping and
all of them would send the traffic. An explicit `on` with several API servers is refused for the same reason.
"""

from __future__ import annotations

from entrypoint.config.settings import Settings
from entrypoint.config.warmup import Warmup
from entrypoint.resolve.cpu_engine import CPU_MAX_SAMPLED_BATCH, CPU_VLLM_DOC
from entrypoint.resolve.engine_args import EngineArgs
from entrypoint.resolve.gpu_types import GpuInventory
from entrypoint.utils.errors import ConfigError
from entrypoint.warmup import MAX_SAMPLED_BATCH_ENV, WARMUP_ENV

START_TIME_DOC = "docs/results/start-time.md"  # the first-request stall and the starts, measured
WHAT = "the server sends itself the bake's requests before /ping answers 200"


def api_servers(engine: EngineArgs) -> int:
    """How many API server processes vLLM starts: one per data-parallel rank (vLLM's default, entrypoints/cli/serve.py
    of 0.26 and 0.32; `--api-server-count` is not an option the resolver passes)."""
    return int(engine.values.get("data_parallel_size", "1"))


def warmup_env(
    settings: Settings, gpus: GpuInventory, engine: EngineArgs, *, headless: bool = False
) -> tuple[dict[str, str], str]:
    """(environment for the server, one reason line). `headless`: a worker node, which runs no API server."""
    servers = api_servers(engine)
    off = {WARMUP_ENV: "off"}  # said either way: the plan's value beats one left in the container's environment
    if settings.warmup is Warmup.OFF:
        return off, "warmup: off (option.warmup)"
    if headless:
        if settings.warmup is Warmup.ON:
            raise ConfigError(
                settings.option_label("warmup"), settings.warmup.value,
                "a worker node (node_role=worker) runs vLLM headless, with no API server to send requests to; the "
                "head warms every engine up through its own", "off or auto on a worker",
            )  # fmt: skip
        return off, "warmup: off (auto: node_role=worker runs headless, no API server; the head warms up)"
    if settings.warmup is Warmup.ON:
        if servers > 1:
            raise ConfigError(
                settings.option_label("warmup"), settings.warmup.value,
                f"needs one API server process, and vLLM starts {servers} here (one per data-parallel "
                "rank): each would hold only its own /ping", "off, or one API server",
            )  # fmt: skip
        env = {WARMUP_ENV: "on"}
        if gpus.is_cpu:
            env[MAX_SAMPLED_BATCH_ENV] = str(CPU_MAX_SAMPLED_BATCH)
            return env, f"warmup: on (option.warmup): {WHAT}; seeded batches capped at {CPU_MAX_SAMPLED_BATCH} " \
                        f"(a CPU engine crash, {CPU_VLLM_DOC})"  # fmt: skip
        return env, f"warmup: on (option.warmup): {WHAT}"
    if gpus.is_cpu:
        return off, "warmup: off (auto: the CPU engine runs eager and compiles no kernels on a shape's first request)"
    if servers > 1:
        return off, f"warmup: off (auto: {servers} API server processes would each hold only their own /ping)"
    return {WARMUP_ENV: "on"}, (
        f"warmup: on (auto: vLLM compiles MoE and sampler Triton kernels on a shape's first request; {WHAT}; "
        f"{START_TIME_DOC})"
    )
