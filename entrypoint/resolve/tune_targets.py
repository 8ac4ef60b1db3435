"""What tuning on the serving GPU has to cover for one plan (issue 32): the MoE shape one GPU's kernel sees under the
plan's TP/EP split, and the batch sizes M the served engine runs that kernel at. Pure: no GPU, no vLLM import.

Decode: under CUDA graphs every decode step runs the graph of the next capture size, so the MoE layer sees capture
sizes only. vLLM 0.32's default list (vllm/config/vllm.py, `_set_cudagraph_sizes`, no speculative decoding): 1, 2, 4,
then every 8 below 256, then every 16, up to min(2 x max_num_seqs, 512, max_num_batched_tokens), plus max_num_seqs
when it fits. Prefill: chunks of up to max_num_batched_tokens tokens. vLLM picks the tuned entry whose M is nearest to
the batch (`try_get_optimal_moe_config`), so a grid of those sizes covers every M in between; the grid is the one the
image's shipped files were tuned on (kernels.config_files.M_GRID, with larger chunks) plus the largest capture size
and the chunk size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from entrypoint.model.types import ModelDescription, MoEShape, Quantization
from entrypoint.resolve.engine_args import EngineArgs
from entrypoint.resolve.plan import Plan
from entrypoint.resolve.tuned_configs import tuned_file_name
from entrypoint.utils.argv import flag_value
from kernels.config_files import M_GRID
from kernels.shapes import BLOCK_FP8, KernelShape, ModelMoE

# vLLM 0.32's API-server defaults on a GPU of >= 70 GiB that is not an A100 (H100, H200), when the plan sets none
# (vllm/engine/arg_utils.py, get_batch_defaults).
DEFAULT_MAX_NUM_SEQS = 1024
DEFAULT_MAX_BATCHED_TOKENS = 8192
CAPTURE_CEILING = 512  # vLLM's default_max_graph_size below SM100
TUNE_GRID = (*M_GRID, 8192, 16384)


def capture_sizes(max_num_seqs: int, max_num_batched_tokens: int) -> tuple[int, ...]:
    """vLLM 0.32's default CUDA-graph capture sizes for a server without speculative decoding."""
    ceiling = min(max_num_seqs * 2, CAPTURE_CEILING, max_num_batched_tokens)
    sizes = {m for m in (1, 2, 4) if m <= ceiling}
    sizes.update(range(8, min(ceiling + 1, 256), 8))
    sizes.update(range(256, ceiling + 1, 16))
    if max_num_batched_tokens <= ceiling:
        sizes.add(max_num_batched_tokens)
    if max_num_seqs <= ceiling:
        sizes.add(max_num_seqs)
    return tuple(sorted(sizes))


@dataclass(frozen=True)
class TuneTarget:
    """One tile file to tune: the kernel's shape on one GPU, vLLM's file name for it, and the M values, decode sizes
    first (what a budget cut keeps)."""

    shape: KernelShape
    file_name: str
    decode_ms: tuple[int, ...]
    prefill_ms: tuple[int, ...]

    @property
    def ms(self) -> tuple[int, ...]:
        return self.decode_ms + self.prefill_ms


def batch_sizes(engine: EngineArgs) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(decode M values, prefill M values) to tune for the plan's engine sizes."""
    seqs = engine.max_num_seqs or DEFAULT_MAX_NUM_SEQS
    tokens = int(engine.values.get("max_num_batched_tokens") or DEFAULT_MAX_BATCHED_TOKENS)
    largest = capture_sizes(seqs, tokens)[-1]
    decode = sorted({m for m in TUNE_GRID if m <= largest} | {largest})
    prefill = sorted({m for m in TUNE_GRID if largest < m <= tokens} | ({tokens} if tokens > largest else set()))
    return tuple(decode), tuple(prefill)


def tune_target(model: ModelDescription, engine: EngineArgs, gpu_name: str) -> TuneTarget:
    """The tile file the plan's Triton MoE kernel reads on this GPU, and the M values to tune it at. The caller checks
    that the plan runs vLLM's Triton MoE on an FP8 MoE checkpoint (the only case the tiles matter)."""
    return _target(model.source, model.moe, model.quantization, engine, gpu_name)


def plan_tune_target(plan: Plan, gpu_name: str) -> TuneTarget:
    """tune_target for what a plan runs: its model's MoE shape and quantisation, its argv's split and batch sizes."""
    info = plan.model_info
    return _target(info.source or plan.model, info.moe, plan.quantization, plan_engine_sizes(plan.vllm_args), gpu_name)


def _target(source: str, moe: MoEShape | None, quant: Quantization, engine: EngineArgs, gpu_name: str) -> TuneTarget:
    if moe is None or not quant.is_fp8:
        raise ValueError(f"{source}: tuning needs an FP8 MoE checkpoint")
    block = quant.block_shape
    experts = ModelMoE(
        name=source,
        hidden=moe.hidden_size,
        expert_width=moe.expert_intermediate_size,
        experts=moe.num_experts,
        topk=moe.top_k,
        gated=moe.gated,
        block_fp8=block == BLOCK_FP8,
    )
    ranks = engine.tensor_parallel_size
    # vLLM's expert-parallel group is the TP group here: each of its ranks holds whole experts
    shape = KernelShape(experts, tp=1, ep=ranks) if engine.expert_parallel else KernelShape(experts, tp=ranks)
    decode, prefill = batch_sizes(engine)
    name = tuned_file_name(shape.e, shape.n, gpu_name, "fp8_w8a8", block)
    return TuneTarget(shape, name, decode, prefill)


def plan_engine_sizes(vllm_args: Sequence[str]) -> EngineArgs:
    """The split and batch sizes a plan's argv gives vLLM (what the tune must cover); vLLM's defaults where absent."""
    values = {}
    for flag, key in (("--max-num-batched-tokens", "max_num_batched_tokens"),):
        if (value := flag_value(vllm_args, flag)) is not None:
            values[key] = value
    seqs = flag_value(vllm_args, "--max-num-seqs")
    return EngineArgs(
        values=values,
        tensor_parallel_size=int(flag_value(vllm_args, "--tensor-parallel-size") or 1),
        expert_parallel="--enable-expert-parallel" in vllm_args,
        max_num_seqs=int(seqs) if seqs else None,
    )
