"""`uniform_one_launch`: uniform expert routing for the benchmark rows in one kernel per MoE layer, lab only.

Why: vLLM's `uniform_random` strategy draws `torch.rand`, takes `torch.topk` and fills the weights with
`torch.ones`. The first profile of a served decode step (2026-12-05, Qwen3-30B-A3B at one request) found those
kernels at 144 per step and 542 µs of 3,276 µs of GPU time (16.6 %). Production runs one small top-k kernel instead,
so every uniform_random row carried ~0.4 ms per token that no user pays, and every ratio between rows was pulled
towards 1 at low concurrency.

Two samplers draw the same distribution (top_k distinct experts per token, every k-subset equally likely, weights 1):

- `topk` (the first build, the engine's until 2026-12-05b): per token, the top_k of E uniform Philox keys, 16 tokens
  a program. Measured on the H200 (benchmarks/results/e2e/issue33_2026-12-05b/SUMMARY.md) it missed: 20.4 µs per
  launch at one token, against 11.3 µs for vLLM's three kernels, and as long at 512 tokens (18.9 µs) as at one: a
  cost per launch. Its code is the lead: compiled for sm_90 it is 6,032 SASS instructions (96 KB, 80 registers),
  every one run once (the 16 × 128 key tile's 8 argmax passes, unrolled), so no instruction is fetched twice and the
  caches cannot help; `python -m benchmarks.kernels.uniform_route_code` counts them on any machine.
- `floyd` (the engine's now): one lane per token; Floyd's algorithm draws a uniform k-subset from k Philox numbers
  (for j = E−k … E−1: t uniform in [0, j]; take t, or j when t is taken already). ~580 instructions for any E; no
  cross-lane step. Its slot order is not random (late slots lean to high expert ids); nothing downstream reads the
  order: the weights are all 1 and the MoE sums over the slots.

`python -m benchmarks.kernels.bench_uniform_route` times both (and each suspect of the first) on the H200.

How the draws change between CUDA-graph replays: the seed is a counter in GPU memory that each program takes and
bumps with one atomic. A replayed graph reads the live counter, so each replay, each layer and each program draws
afresh (a seed passed from Python would be a constant baked into the graph).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

STRATEGY = "uniform_one_launch"
SAMPLERS = ("floyd", "topk")
TOKENS_PER_PROGRAM = {"floyd": 32, "topk": 16}  # floyd: one warp of lanes, a token each


@triton.jit
def _seed(counter_ptr, BUMP: tl.constexpr):
    """This program's seed: the live call counter, taken and bumped by one atomic, so no two programs of any launches
    share a seed. (Until 2026-12-05 program 0 alone bumped it and the others read it: a program that read it late in
    one launch and early in the next drew the same experts twice, from the second program of a launch on.)"""
    if BUMP:  # noqa: SIM108 (a constexpr branch: Triton compiles one side only)
        seed = tl.atomic_add(counter_ptr, 1)
    else:
        seed = tl.load(counter_ptr)
    return seed


@triton.jit
def uniform_route_floyd_kernel(
    counter_ptr,
    ids_ptr,
    weights_ptr,
    num_tokens,
    NUM_EXPERTS: tl.constexpr,
    TOP_K: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BUMP: tl.constexpr,
):
    seed = _seed(counter_ptr, BUMP)
    tokens = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    valid = tokens < num_tokens
    picked = ()  # this token's experts so far, one tensor a slot (static_range unrolls, so the tuple may grow)
    for slot in tl.static_range(TOP_K):
        bound = NUM_EXPERTS - TOP_K + slot  # Floyd's j: E - k, ..., E - 1
        draw = tl.randint(seed, tokens * TOP_K + slot)
        candidate = tl.umulhi(draw, bound + 1).to(tl.int32)  # uniform in [0, j] (bias < j / 2^32)
        taken = candidate < 0  # all False, in the lanes' shape
        for earlier in tl.static_range(slot):
            taken = taken | (picked[earlier] == candidate)
        expert = tl.where(taken, bound, candidate)  # j itself cannot be taken yet: earlier slots drew below j
        picked = picked + (expert,)  # noqa: RUF005 (Triton's code generator takes no starred tuple)
        tl.store(ids_ptr + tokens * TOP_K + slot, expert.to(ids_ptr.dtype.element_ty), mask=valid)
        tl.store(weights_ptr + tokens * TOP_K + slot, tl.full([BLOCK_T], 1.0, tl.float32), mask=valid)


@triton.jit
def uniform_route_topk_kernel(
    counter_ptr,
    ids_ptr,
    weights_ptr,
    num_tokens,
    NUM_EXPERTS: tl.constexpr,
    TOP_K: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BUMP: tl.constexpr,  # False only in the bench's variant that isolates the atomic's cost (every call draws alike)
    PHILOX: tl.constexpr,  # False only in the bench's variant that isolates Philox's cost (a hash instead)
    UNROLL: tl.constexpr,  # False: the TOP_K passes as a loop, not unrolled (the bench's compact-code variant)
):
    seed = _seed(counter_ptr, BUMP)
    tokens = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    experts = tl.arange(0, BLOCK_E)
    offsets = tokens[:, None] * NUM_EXPERTS + experts[None, :]
    if PHILOX:  # noqa: SIM108 (a constexpr branch: Triton compiles one side only)
        keys = tl.rand(seed, offsets)
    else:  # Knuth's multiplicative hash of (offset + seed): distinct keys per row, not uniform; timing only
        keys = (((offsets + seed).to(tl.uint32) * 2654435761) >> 8).to(tl.float32)
    keys = tl.where(experts[None, :] < NUM_EXPERTS, keys, -1.0)
    valid = tokens < num_tokens
    if UNROLL:
        for slot in tl.static_range(TOP_K):
            keys = _pick(keys, slot, tokens, experts, valid, ids_ptr, weights_ptr, TOP_K, BLOCK_T)
    else:
        for slot in tl.range(0, TOP_K, loop_unroll_factor=1):
            keys = _pick(keys, slot, tokens, experts, valid, ids_ptr, weights_ptr, TOP_K, BLOCK_T)


@triton.jit
def _pick(keys, slot, tokens, experts, valid, ids_ptr, weights_ptr, TOP_K: tl.constexpr, BLOCK_T: tl.constexpr):
    """One top-k pass: each token's largest key is its next expert (weight 1); that key then leaves the race."""
    best = tl.argmax(keys, axis=1)
    tl.store(ids_ptr + tokens * TOP_K + slot, best.to(ids_ptr.dtype.element_ty), mask=valid)
    tl.store(weights_ptr + tokens * TOP_K + slot, tl.full([BLOCK_T], 1.0, tl.float32), mask=valid)
    return tl.where(experts[None, :] == best[:, None], -2.0, keys)


def uniform_route(
    counter: torch.Tensor,
    num_tokens: int,
    num_experts: int,
    top_k: int,
    indices_type: torch.dtype,
    *,
    sampler: str = "floyd",
    tokens_per_program: int | None = None,
    num_warps: int | None = None,
    bump: bool = True,
    philox: bool = True,
    unroll: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(weights float32 of ones, ids) of shape (num_tokens, top_k): top_k distinct uniform experts per token.

    The engine runs the defaults (`floyd`, 32 tokens a one-warp program). `sampler="topk"`, tokens_per_program,
    num_warps, bump=False and (topk only) philox=False and unroll=False are the variants that
    `benchmarks.kernels.bench_uniform_route` compares."""
    if not 1 <= top_k <= num_experts:
        raise ValueError(f"top_k={top_k} with {num_experts} experts: need 1 <= top_k <= experts")
    launch = Launch.of(sampler, num_experts, top_k, tokens_per_program, num_warps, bump, philox, unroll)
    device = counter.device
    ids = torch.empty(num_tokens, top_k, dtype=indices_type, device=device)
    weights = torch.empty(num_tokens, top_k, dtype=torch.float32, device=device)
    if num_tokens:
        grid = (triton.cdiv(num_tokens, launch.block_t),)
        launch.kernel[grid](counter, ids, weights, num_tokens, **launch.constants, num_warps=launch.num_warps)
    return weights, ids


@dataclass(frozen=True)
class Launch:
    """A sampler's kernel, constexpr arguments and warps: what `uniform_route` launches and what the sm_90 code
    count (benchmarks/kernels/uniform_route_code.py) compiles."""

    kernel: Any
    constants: dict[str, Any]
    block_t: int
    num_warps: int

    @staticmethod
    def of(
        sampler: str,
        num_experts: int,
        top_k: int,
        tokens_per_program: int | None = None,
        num_warps: int | None = None,
        bump: bool = True,
        philox: bool = True,
        unroll: bool = True,
    ) -> Launch:
        if sampler not in SAMPLERS:
            raise ValueError(f"sampler={sampler!r}: accepted: {', '.join(SAMPLERS)}")
        block_t = tokens_per_program or TOKENS_PER_PROGRAM[sampler]
        common = {"NUM_EXPERTS": num_experts, "TOP_K": top_k, "BLOCK_T": block_t, "BUMP": bump}
        if sampler == "floyd":
            return Launch(uniform_route_floyd_kernel, common, block_t, num_warps or 1)
        extra = {"BLOCK_E": triton.next_power_of_2(num_experts), "PHILOX": philox, "UNROLL": unroll}
        return Launch(uniform_route_topk_kernel, {**common, **extra}, block_t, num_warps or 4)


def make_strategy() -> Any:
    """The strategy object (a vLLM RoutingStrategy); built lazily so importing this module needs no vLLM."""
    from vllm.model_executor.layers.fused_moe.router.routing_simulator_router import RoutingStrategy

    class UniformOneLaunch(RoutingStrategy):
        def __init__(self) -> None:
            self._counters: dict[str, torch.Tensor] = {}

        def counter(self, device: torch.device) -> torch.Tensor:
            # made on the first (eager) forward, the profile run, before any CUDA-graph capture
            key = str(device)
            if key not in self._counters:
                self._counters[key] = torch.zeros(1, dtype=torch.int32, device=device)
            return self._counters[key]

        def simulated_logits(self, router_logits: torch.Tensor, top_k: int) -> torch.Tensor:
            """Keys whose top-k is a uniform pick, for the folded routing's rows (entrypoint/moe_plugin/
            fold_routing.py): the fold takes its own top-k, so a plain uniform draw is this strategy there."""
            return torch.rand(router_logits.shape, device=router_logits.device)

        def route_tokens(
            self,
            hidden_states: torch.Tensor,
            router_logits: torch.Tensor,
            top_k: int,
            indices_type: torch.dtype | None = None,
        ) -> tuple[torch.Tensor, torch.Tensor]:
            return uniform_route(
                self.counter(hidden_states.device),
                hidden_states.shape[0],
                router_logits.shape[-1],
                top_k,
                indices_type or torch.long,
            )

    return UniformOneLaunch()
