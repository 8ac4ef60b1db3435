"""The served configuration: the exact command and environment `python -m entrypoint serve` would exec.

A benchmark row is what a user runs, so the engine is built the way the image builds it: the image's default
serving.properties, then the benchmark's own needs given as `OPTION_*` variables (as a SageMaker user sets
them), resolved by `entrypoint.inputs.gather.build_plan`, turned into argv and environment by the same
`entrypoint.serve` functions that `serve` execs. The benchmark's needs are only these:
- `load_format=dummy` (random weights: the bundled models are config files),
- `max_model_len` and `max_rolling_batch_size` (the workload's longest request, its largest concurrency; a start
  measured as it ships leaves max_model_len to the checkpoint, `--max-model-len model`),
- `gpu_memory_utilization`,
- with `--compile none` only (labelled "not what ships"): a compilation config without torch.compile,
plus what the run asks with `--option KEY=VALUE` (benchmarks/e2e/options.py: e.g. tensor_parallel_degree=4 or
enable_expert_parallel=true), the same for every row. Everything else (torch.compile with vLLM's defaults, CUDA
graphs, async scheduling, prefix caching, the LMI middleware, the tuned-config folder) is what `serve` runs.

The comparison rows change the plan's MoE backend switch and nothing else: `auto` drops `--moe-backend`
(vLLM's own choice), `triton` is `--moe-backend triton` on vLLM's default tiles (what LMI v28/v29 run), ...
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.e2e import options as bench_opts
from benchmarks.e2e.backends import REPO_ROOT, SWITCH_ENVS, TUNED_ENV, EngineSetup

if TYPE_CHECKING:
    from entrypoint.resolve.plan import Plan

IMAGE_DEFAULT_PROPERTIES = REPO_ROOT / "serving.properties"
MOE_FLAG = "--moe-backend"
# Without torch.compile, full CUDA graphs for decode only (the setting of the first H200 figures).
COMPILE_NONE = {"mode": 0, "cudagraph_mode": "FULL_DECODE_ONLY"}
SERVED_COMPILE_MODES = ("default", "none")


@dataclass(frozen=True)
class ServedCommand:
    argv: tuple[str, ...]  # python -m entrypoint.serve serve <plan argv>
    env: dict[str, str]  # the plan's environment over the base one, minus what the row unsets
    moe_backend: str  # what --moe-backend says ("auto" when absent)
    plan_moe_backend: str  # what the resolver chose
    reasons: tuple[str, ...]


def bench_options(
    *,
    max_model_len: int | None,
    max_num_seqs: int,
    gpu_memory_utilization: float,
    compile_mode: str,
    extra: Mapping[str, str] | None = None,
    load_format: str = "dummy",
) -> dict[str, str]:
    """The benchmark's needs, and the run's --option pairs (`extra`), as OPTION_* variables (a SageMaker user's).
    `load_format`: dummy (random values, throughput only: see benchmarks/e2e/random_checkpoint.py) or auto."""
    if compile_mode not in SERVED_COMPILE_MODES:
        raise ValueError(f"compile mode {compile_mode!r}: the served engine takes {', '.join(SERVED_COMPILE_MODES)}")
    options = {
        "OPTION_LOAD_FORMAT": load_format,
        "OPTION_MAX_ROLLING_BATCH_SIZE": str(max_num_seqs),
        "OPTION_GPU_MEMORY_UTILIZATION": str(gpu_memory_utilization),
    }
    if max_model_len is not None:  # None: the checkpoint's own, as the image serves it
        options["OPTION_MAX_MODEL_LEN"] = str(max_model_len)
    if compile_mode == "none":
        config = {**COMPILE_NONE, "max_cudagraph_capture_size": max_num_seqs}
        options["OPTION_COMPILATION_CONFIG"] = json.dumps(config, separators=(",", ":"))
    return {**bench_opts.as_environment(extra or {}), **options}


def with_moe_backend(argv: tuple[str, ...], backend: str | None) -> tuple[str, ...]:
    """argv with its `--moe-backend X` replaced by `backend` (None: removed, vLLM chooses)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == MOE_FLAG:
            skip = True
            continue
        if arg.startswith(MOE_FLAG + "="):
            continue
        out.append(arg)
    if backend is not None:
        out += [MOE_FLAG, backend]
    return tuple(out)


def moe_backend_of(argv: tuple[str, ...]) -> str:
    for i, arg in enumerate(argv):
        if arg == MOE_FLAG and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(MOE_FLAG + "="):
            return arg.split("=", 1)[1]
    return "auto"


def served_plan(
    model_dir: Path,
    environ: Mapping[str, str],
    *,
    port: int,
    options: Mapping[str, str],
    gpu: str | None = None,
    num_gpus: int | None = None,
    vllm_version: str | None = None,
) -> Plan:
    """The plan `serve` resolves for this model: the image default serving.properties under the options.
    Raises entrypoint.utils.errors.ConfigError where `serve` would refuse to start."""
    from entrypoint.inputs.gather import build_plan

    base = {**environ, "MOE_SERVING_DEFAULT_PROPERTIES": str(IMAGE_DEFAULT_PROPERTIES), **options}
    return build_plan(
        model=str(model_dir), environ=base, host="127.0.0.1", port=port, gpu=gpu, num_gpus=num_gpus,
        vllm_version=vllm_version,
    )  # fmt: skip


def row_command(
    plan: Plan, setup: EngineSetup, environ: Mapping[str, str], options: Mapping[str, str]
) -> ServedCommand:
    """The row's server: the plan's argv and environment, with the row's MoE backend switch and nothing else."""
    from entrypoint.serve import vllm_command, vllm_environment

    base = {**environ, "MOE_SERVING_DEFAULT_PROPERTIES": str(IMAGE_DEFAULT_PROPERTIES), **options}
    argv = tuple(vllm_command(plan))
    # comparison rows' switches (plan_fold, plan_fold_pdl): an exported one must not reach the other rows
    env = {k: v for k, v in vllm_environment(plan, base).items() if k not in SWITCH_ENVS}
    if setup.backend != "plan":
        argv = with_moe_backend(argv, setup.moe_backend)
        env = {k: v for k, v in env.items() if k not in setup.unset_env and k != TUNED_ENV}
        env.update(setup.env)
    return ServedCommand(argv, env, moe_backend_of(argv), plan.moe_backend, plan.reasons)


def served_command(
    model_dir: Path,
    setup: EngineSetup,
    environ: Mapping[str, str],
    *,
    port: int,
    options: Mapping[str, str],
    gpu: str | None = None,
    num_gpus: int | None = None,
    vllm_version: str | None = None,
) -> ServedCommand:
    """The row's server: the plan `serve` would run for this model, with the row's MoE backend switch."""
    plan = served_plan(model_dir, environ, port=port, options=options, gpu=gpu, num_gpus=num_gpus,
                       vllm_version=vllm_version)  # fmt: skip
    return row_command(plan, setup, environ, options)
