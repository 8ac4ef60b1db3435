"""GPU harness around vLLM's own Triton fused-MoE (``fused_experts``): inputs, timing, correctness.

Used by the tile search (kernels/tuning/search.py via `python -m entrypoint tune` and tools/tune.py), tools/aot_check.py
and the benchmarks under benchmarks/kernels/. Needs an NVIDIA GPU and
an importable vLLM (the image, or the offline bundle at PYTHONPATH=/root/site).

Timing (kernels/tuning/timer.py ``graph_us``): R calls of ``fused_experts`` on R different uniform routings are
captured in one CUDA graph and the graph is replayed between CUDA events; the per-call time is the
median over batches / R. Rotating routings keeps the working set of touched experts above the L2
size (50 MB on H200), so weights stream from HBM as they do in serving; every shape's full weight set
is > 150 MB. The routing prep (moe_align_block_size), activation quantisation and moe_sum are inside the
timed region, as in vLLM's benchmark_moe.py, because the tile's BLOCK_SIZE_M changes them too.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kernels.config_files import TILE_KEYS, Tile, lookup, read_config_file
from kernels.shapes import KernelShape
from kernels.tuning.routing_weights import hot_expert_weights, hot_experts_touched, uniform_experts_touched
from kernels.tuning.timer import graph_us

L2_BYTES = 50 * 1024 * 1024
# How the tokens of a timed batch pick their experts: "uniform" (vLLM's tuner's: top-k of uniform scores), "shared"
# (every token on the first token's experts: the collapsed extreme of dummy weights), "hot" (routing_weights.py: half
# of the mass on a few hot experts, as trained routers are uneven)
ROUTINGS = ("uniform", "shared", "hot")


def vllm_fused_moe() -> Any:
    """vLLM's fused_moe module (imported lazily: ~20 s the first time)."""
    from vllm.model_executor.layers.fused_moe import fused_moe

    return fused_moe


def vllm_default_tile(shape: KernelShape, m: int) -> Tile:
    """vLLM's built-in tile for M when no tuned file matches (get_default_config)."""
    cfg = vllm_fused_moe().get_default_config(m, shape.e, shape.n, shape.h, shape.topk, shape.dtype, shape.block_shape)
    return {k: int(cfg[k]) for k in TILE_KEYS}


def vllm_shipped_table(shape: KernelShape) -> dict[int, Tile] | None:
    """vLLM's own shipped file for this shape (configs/ inside the wheel), ignoring our folder."""
    fm = vllm_fused_moe()
    name = fm.get_config_file_name(shape.e, shape.n, shape.dtype, shape.block_shape)
    path = Path(fm.__file__).resolve().parent / "configs" / name
    if not path.exists():
        return None
    # vLLM passes a tile's keys straight to the launch; absent warps/stages take Triton's defaults.
    triton_defaults = {"num_warps": 4, "num_stages": 3, "GROUP_SIZE_M": 1}
    table = read_config_file(path)
    return {m: {t: int(v.get(t, triton_defaults.get(t, 0))) for t in TILE_KEYS} for m, v in table.items()}


def incumbent_tile(shape: KernelShape, m: int, shipped: dict[int, Tile] | None) -> Tile:
    """What vLLM runs today for (shape, M): its shipped file's entry, else its default heuristic."""
    return dict(lookup(shipped, m)) if shipped else vllm_default_tile(shape, m)


def expected_active_experts(shape: KernelShape, m: int, routing: str = "uniform") -> float:
    """Distinct experts hit by M tokens × topk routes (without replacement per token; "shared": what one token hits)."""
    if routing == "hot":
        return hot_experts_touched(shape.e, shape.topk, m)
    return uniform_experts_touched(shape.e, shape.topk, 1 if routing == "shared" else m)


def rotations(shape: KernelShape, m: int, routing: str = "uniform") -> int:
    """Calls per graph: enough distinct routings that ≥3× L2 of expert weights is touched per replay (a "shared"
    routing touches what one token does)."""
    touched = expected_active_experts(shape, m, routing) * shape.weight_bytes_per_expert()
    return max(4, min(16, math.ceil(3 * L2_BYTES / max(touched, 1))))


Batch = list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]  # (hidden, topk_weights, topk_ids) per routing


def distinct_experts(batch: Batch) -> float:
    """Mean number of distinct experts a routing of ``batch`` touches (what the weights' HBM traffic scales with)."""
    return sum(int(ids.unique().numel()) for _, _, ids in batch) / len(batch)


def hbm_floor_us(shape: KernelShape, batch: Batch, hbm_gbs: float) -> float:
    """The floor of one call: the distinct experts' FP8 weight bytes read once at the measured HBM bandwidth."""
    return distinct_experts(batch) * shape.weight_bytes_per_expert() / (hbm_gbs * 1e9) * 1e6


def random_weights(shape: KernelShape, device: str = "cuda") -> tuple[torch.Tensor, torch.Tensor]:
    """(w1 (E, N1, H), w2 (E, H, N)) fp8, the same values for every problem of a shape (seed 0): our kernel and
    vLLM's are timed on identical weights."""
    s, fp8 = shape, torch.float8_e4m3fn
    gen = torch.Generator(device=device).manual_seed(0)
    w1 = (torch.randn(s.e, s.n1, s.h, device=device, generator=gen) * 0.5).to(fp8)
    w2 = (torch.randn(s.e, s.h, s.n, device=device, generator=gen) * 0.5).to(fp8)
    return w1, w2


def random_scales(shape: KernelShape, device: str = "cuda") -> dict[str, Any]:
    """Scales as ``ops.fused_moe_fp8`` takes them: per-tensor weight scales with static activation scales, or
    128×128 block weight scales with dynamic activations (DeepSeek-V3's checkpoint format)."""
    s = shape
    if s.block_shape:
        bn, bk = s.block_shape
        return dict(
            w13_scale=torch.rand(s.e, s.n1 // bn, s.h // bk, device=device) * 0.01 + 0.005,  # (E, N1/128, H/128)
            w2_scale=torch.rand(s.e, s.h // bn, s.n // bk, device=device) * 0.01 + 0.005,  # (E, H/128, N/128)
            block_shape=list(s.block_shape),
        )
    return dict(
        w13_scale=torch.rand(s.e, device=device) * 0.01 + 0.005,  # (E,) per-tensor weight scales
        w2_scale=torch.rand(s.e, device=device) * 0.01 + 0.005,
        a13_scale=torch.full((1,), 0.02, device=device),  # static per-tensor activation scales
        a2_scale=torch.full((1,), 0.02, device=device),
    )


def random_routings(
    shape: KernelShape, m: int, count: int, seed: int = 1, device: str = "cuda", routing: str = "uniform"
) -> Batch:
    """``count`` (hidden (M,H) bf16, topk_weights (M,k) f32, topk_ids (M,k) int32) routings of one kind (ROUTINGS):
    uniform; shared (every token picks the first token's experts); hot (top-k by Gumbel keys on the hot weights)."""
    if routing not in ROUTINGS:
        raise ValueError(f"routing={routing!r}; accepted: {', '.join(ROUTINGS)}")
    s = shape
    gen = torch.Generator(device=device).manual_seed(seed)
    log_weights = torch.tensor(hot_expert_weights(s.e, s.topk), device=device).log()
    out = []
    for _ in range(count):
        x = torch.randn(m, s.h, device=device, dtype=torch.bfloat16, generator=gen)
        scores = torch.rand(m, s.e, device=device, generator=gen)
        if routing == "hot":
            scores = log_weights - torch.log(-torch.log(scores.clamp(min=1e-20)))
        ids = scores.topk(s.topk, dim=1).indices.to(torch.int32)
        if routing == "shared":
            ids = ids[:1].expand(m, -1)
        w = torch.rand(m, s.topk, device=device, generator=gen)
        out.append((x, (w / w.sum(dim=1, keepdim=True)).contiguous(), ids.contiguous()))
    return out


@dataclass
class PlainMoEProblem:
    """Random FP8 weights + scales for one shape on the GPU (never zeros: see METHOD.md), and its routings.

    What our kernel (ops/) is timed on; needs no vLLM. ``MoEProblem`` adds vLLM's quant config on the same values.
    """

    shape: KernelShape
    device: str = "cuda"
    w1: torch.Tensor = field(init=False)
    w2: torch.Tensor = field(init=False)
    scales: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.w1, self.w2 = random_weights(self.shape, self.device)  # (E, N1, H), (E, H, N) fp8
        self.scales = random_scales(self.shape, self.device)

    def inputs(self, m: int, count: int, seed: int = 1, routing: str = "uniform") -> Batch:
        return random_routings(self.shape, m, count, seed, self.device, routing=routing)


@dataclass
class MoEProblem(PlainMoEProblem):
    """``PlainMoEProblem`` plus vLLM's fp8_w8a8 quant config of the same scales; ``run`` calls vLLM's kernel."""

    quant_config: Any = field(init=False)

    def __post_init__(self) -> None:
        from vllm.model_executor.layers.fused_moe.config import fp8_w8a8_moe_quant_config

        super().__post_init__()
        sc = self.scales
        if self.shape.block_shape:
            self.quant_config = fp8_w8a8_moe_quant_config(
                w1_scale=sc["w13_scale"], w2_scale=sc["w2_scale"], block_shape=sc["block_shape"]
            )
        else:
            self.quant_config = fp8_w8a8_moe_quant_config(
                w1_scale=sc["w13_scale"], w2_scale=sc["w2_scale"], a1_scale=sc["a13_scale"], a2_scale=sc["a2_scale"]
            )

    def run(self, x: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        from vllm.model_executor.layers.fused_moe.activation import MoEActivation

        act = MoEActivation.SILU if self.shape.model.gated else MoEActivation.RELU2_NO_MUL
        return vllm_fused_moe().fused_experts(
            x,
            self.w1,
            self.w2,
            weights,
            ids,
            activation=act,
            apply_router_weight_on_input=self.shape.model.router_weight_on_input,
            quant_config=self.quant_config,
        )


@contextmanager
def forced_tile(tile: Tile | None):
    """Make vLLM use ``tile`` for every M (vLLM's own override hook), or its normal lookup for None."""
    if tile is None:
        yield
        return
    from vllm.model_executor.layers.fused_moe import override_config

    with override_config(dict(tile)):
        yield


class GraphTimer:
    """Times ``fused_experts`` for one (problem, M) with a given tile; see the module docstring."""

    def __init__(self, problem: MoEProblem, m: int, routing: str = "uniform") -> None:
        """``routing``: how the batch's tokens pick experts (ROUTINGS, random_routings)."""
        self.problem, self.m = problem, m
        self.batch = problem.inputs(m, rotations(problem.shape, m, routing), routing=routing)

    def measure(self, tile: Tile | None, batches: int = 3) -> float:
        """Median µs per fused_experts call over ``batches`` timed batches of graph replays; the tile is forced
        while the graph is captured (vLLM picks the config at launch, so the replays keep it)."""

        def run_all() -> None:
            for x, w, i in self.batch:
                self.problem.run(x, w, i)

        with forced_tile(tile):
            return graph_us(run_all, calls=len(self.batch), batches=batches)


def reference_moe(problem: MoEProblem, x: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Readable float32 MoE on dequantised weights (activations not quantised): the numerics anchor.

    Loops over the experts actually routed to and dequantises one expert at a time, so memory stays
    at one expert's float32 weights (Mixtral TP1: 0.7 GB) whatever M is.
    """
    s = problem.shape
    qc = problem.quant_config
    xf = x.float()
    out = torch.zeros_like(xf)

    def deq(w: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:  # one expert: (rows, cols) fp8
        if s.block_shape:
            bn, bk = s.block_shape
            return w.float() * scale.repeat_interleave(bn, dim=0).repeat_interleave(bk, dim=1)
        return w.float() * scale

    for e in ids.unique().tolist():
        tok, slot = (ids == e).nonzero(as_tuple=True)
        route_w = weights[tok, slot].unsqueeze(1)
        inp = xf[tok] * route_w if s.model.router_weight_on_input else xf[tok]
        h1 = inp @ deq(problem.w1[e], qc.w1_scale[e]).T  # (rows, N1)
        if s.model.gated:
            g, u = h1.chunk(2, dim=1)
            act = torch.nn.functional.silu(g) * u
        else:
            act = torch.relu(h1).square()
        y = act @ deq(problem.w2[e], qc.w2_scale[e]).T  # (rows, H)
        out.index_add_(0, tok, y if s.model.router_weight_on_input else y * route_w)
    return out
