"""The tuner's GPU side: vLLM's incumbent tile, a tile's time, and our kernel against vLLM's at one M.

Needs an NVIDIA GPU and vLLM (the image). Every candidate tile of a shape is compiled ahead of time in a process pool
(kernels/aot.py, no GPU work) before the first is timed, so timing only loads cubins; without it each candidate's
first launch would JIT-compile for 1-3 s inside the budget. One shape's weights live on the GPU at a time.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from kernels import aot
from kernels.config_files import Tile
from kernels.shapes import KernelShape
from kernels.tuning import moe_harness
from kernels.tuning.dispatch_rows import KernelPair, choose_config
from kernels.tuning.timer import graph_us


class ProjectKernel(NamedTuple):
    """Our fused-MoE kernel and its config sweep (ops.fused_moe_fp8's fused_moe_fp8 and candidate_configs), handed
    in by the caller: only the engine plugin imports our kernels (pyproject's import contracts), and the tune gets
    them from it (entrypoint.moe_plugin.triton_experts.project_kernel)."""

    run: Callable[..., Any]
    candidate_configs: Callable[..., list[Any]]


class GpuBench:
    """What kernels/tuning/search.Tuner and the dispatch check measure with, on this process's GPU."""

    def __init__(self, ours: ProjectKernel, workers: int | None = None) -> None:
        self.ours = ours
        self.pool = aot.CompilePool(workers or os.cpu_count() or 1)
        self._shipped: dict[str, dict[int, Tile] | None] = {}
        self._incumbents: dict[tuple[str, int], Tile] = {}
        self._problem: moe_harness.MoEProblem | None = None
        self._timers: dict[tuple[int, str], moe_harness.GraphTimer] = {}

    def incumbent_for(self, shape: KernelShape, m: int) -> Tile:
        """vLLM's tile for (shape, M) without our files: its shipped file's entry, else its default heuristic."""
        if shape.key not in self._shipped:
            self._shipped[shape.key] = moe_harness.vllm_shipped_table(shape)
        key = (shape.key, m)
        if key not in self._incumbents:
            self._incumbents[key] = moe_harness.incumbent_tile(shape, m, self._shipped[shape.key])
        return self._incumbents[key]

    def precompile(self, shape: KernelShape, tiles_for: Callable[[int], Iterable[Tile]], ms: Iterable[int]) -> int:
        """Compile every candidate's kernel variants (vLLM's functional and shared GEMM paths); returns the count."""
        cases = [aot.Case.of(shape, m, t) for m in ms for t in tiles_for(m)]
        return aot.wait_all(self.pool.submit(cases, paths=("functional", "both")), f"compile {shape.key}")

    def problem(self, shape: KernelShape) -> moe_harness.MoEProblem:
        if self._problem is None or self._problem.shape != shape:
            self._problem, self._timers = None, {}
            self._problem = moe_harness.MoEProblem(shape)
        return self._problem

    def _timer(self, shape: KernelShape, m: int, routing: str) -> moe_harness.GraphTimer:
        problem = self.problem(shape)
        if (m, routing) not in self._timers:
            self._timers[(m, routing)] = moe_harness.GraphTimer(problem, m, routing)
        return self._timers[(m, routing)]

    def measure(self, shape: KernelShape, m: int, tile: Tile, batches: int) -> float:
        """µs per call of vLLM's fused_experts with ``tile`` forced, uniform routing (vLLM's tuner's)."""
        return self._timer(shape, m, "uniform").measure(tile, batches=batches)

    def pair(self, shape: KernelShape, m: int, tile: Tile) -> KernelPair:
        """Our kernel against vLLM's with ``tile``, on the same weights and routings: our fastest config of a small
        sweep (the default heuristic unless another is > 2 % faster), then both again under hot routing (M > 1)."""
        s = shape
        block_k = s.block_shape[1] if s.block_shape else 128
        configs = self.ours.candidate_configs(m, s.e, s.topk, s.h, s.n, block_k=block_k)
        timed = []
        for config in configs:
            try:
                timed.append((self._ours(shape, m, "uniform", config), config))
            except Exception:  # a config this shape cannot compile (resources): it just loses
                continue
        ours_us, best = choose_config(timed, configs[0])
        chosen = None if best == configs[0] else dataclasses.asdict(best)  # dispatch_row keeps a row's fields
        vllm_us = self._timer(shape, m, "uniform").measure(tile)
        if m == 1:
            return KernelPair(m, ours_us, vllm_us, config=chosen)
        hot_ours = self._ours(shape, m, "hot", best)
        hot_vllm = self._timer(shape, m, "hot").measure(tile)
        return KernelPair(m, ours_us, vllm_us, hot_ours, hot_vllm, config=chosen)

    def _ours(self, shape: KernelShape, m: int, routing: str, config: Any) -> float:
        problem = self.problem(shape)
        timer = self._timer(shape, m, routing)
        act = "silu" if shape.model.gated else "relu2"

        def ours() -> None:
            for x, w, ids in timer.batch:
                self.ours.run(x, problem.w1, problem.w2, w, ids, **problem.scales, activation=act, config=config)

        return graph_us(ours, calls=len(timer.batch))

    def close(self) -> None:
        """Stop the compile pool and hand the GPU memory back: `bake-cache` starts vLLM in this process's wake, and
        vLLM sizes its KV cache from the memory free at its start."""
        import torch

        self.pool.close()
        self._problem, self._timers = None, {}
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def device_name() -> str:
    import torch

    return torch.cuda.get_device_name(0)


def gpu_visible() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())
