"""`uniform_one_launch`: uniform expert routing for the benchmark rows in one kernel per MoE layer, lab only.

Why: vLLM's `uniform_random` strategy draws `torch.rand`, takes `torch.topk` and fills the weights with
`torch.ones`. The first profile of a served decode step (2026-12-05, Qwen3-30B-A3B at one request) found those
kernels at 144 per step and 542 µs of 3,276 µs of GPU time (16.6 %). Production runs one small top-k kernel instead,
so every uniform_random row carried ~0.4 ms per token that no user pays, and every ratio between rows was pulled
towards 1 at low concurrency.

This strategy picks the same distribution (top_k distinct experts per token, every expert equally likely, weights
1) in one Triton launch: per token, the top_k of E uniform keys drawn with Philox. The aim was production's cost.
Measured on the H200 (2026-12-05b, benchmarks/results/e2e/issue33_2026-12-05b/SUMMARY.md), it missed: 20.4 µs per
launch at one token (one program of 128 threads, 80 registers), against 11.3 µs for vLLM's three kernels. Cause open;
suspects: the TOP_K serial argmax passes over a 16-token tile of which one row is live, and the acq_rel atomic.
`python -m benchmarks.kernels.bench_uniform_route` times each suspect alone (queued for the next H200 run). The
2026-12-05b trace adds one: the launch took as long at 512 tokens (32 programs, 18.9 µs) as at one (20.7 µs), so the
cost is per launch. Every loop here is unrolled (Philox for 16 keys per thread, 8 argmax passes); if that code is
fetched from memory at each launch (the engine runs ~14 kernels and ~40 MB of weights between two), its size sets
the time. The bench's `cold` rows test that.

How the draws change between CUDA-graph replays: the seed is a call counter in GPU memory, read by every program and
bumped by program 0. A replayed graph reads the live counter, so each replay and each layer draws afresh (a seed
passed from Python would be a constant baked into the graph). Programs of one launch may read the counter before or
after program 0's bump: each token's draw is still uniform and its experts distinct, which is all a row needs.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

STRATEGY = "uniform_one_launch"
TOKENS_PER_PROGRAM = 16


@triton.jit
def uniform_route_kernel(
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
    pid = tl.program_id(0)
    seed = tl.load(counter_ptr)
    if BUMP and pid == 0:
        tl.atomic_add(counter_ptr, 1)
    tokens = pid * BLOCK_T + tl.arange(0, BLOCK_T)
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
    tokens_per_program: int = TOKENS_PER_PROGRAM,
    num_warps: int = 4,
    bump: bool = True,
    philox: bool = True,
    unroll: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(weights float32 of ones, ids) of shape (num_tokens, top_k): top_k distinct uniform experts per token.

    tokens_per_program, num_warps, bump=False, philox=False and unroll=False are the variants that
    `benchmarks.kernels.bench_uniform_route` compares to find where the 20.4 µs go; the engine runs the defaults."""
    if not 1 <= top_k <= num_experts:
        raise ValueError(f"top_k={top_k} with {num_experts} experts: need 1 <= top_k <= experts")
    device = counter.device
    ids = torch.empty(num_tokens, top_k, dtype=indices_type, device=device)
    weights = torch.empty(num_tokens, top_k, dtype=torch.float32, device=device)
    if num_tokens:
        grid = (triton.cdiv(num_tokens, tokens_per_program),)
        uniform_route_kernel[grid](
            counter,
            ids,
            weights,
            num_tokens,
            NUM_EXPERTS=num_experts,
            TOP_K=top_k,
            BLOCK_E=triton.next_power_of_2(num_experts),
            BLOCK_T=tokens_per_program,
            BUMP=bump,
            PHILOX=philox,
            UNROLL=unroll,
            num_warps=num_warps,
        )
    return weights, ids


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
