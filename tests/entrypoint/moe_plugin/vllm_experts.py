"""vLLM's own TritonExperts for one MoE shape, with random FP8 weights (kernel_checks.problems): what the plugin wraps.

Built from vLLM's config classes (the fields used are in 0.26 and 0.32, but `swiglu_limit`: 0.32's), so the tests
exercise the real class, its quant-config accessors and the plugin's patch of it; on the CPU only our kernel's
branch can run (vLLM's Triton kernel needs CUDA), on the H200 both do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from kernel_checks.problems import fused_moe_problem


@dataclass
class ExpertsCase:
    experts: Any  # vllm ... TritonExperts
    hidden: torch.Tensor  # (M, K) bf16
    w13: torch.Tensor
    w2: torch.Tensor
    topk_weights: torch.Tensor
    topk_ids: torch.Tensor
    kernel_kwargs: dict[str, Any]  # the same problem as ops.fused_moe_fp8 takes it

    def apply(self, cls: type, **overrides: Any) -> torch.Tensor:
        """cls.apply(...) the way vLLM's modular kernel calls it (keywords, unquantised input), into a new output."""
        from vllm.model_executor.layers.fused_moe.activation import MoEActivation

        out = torch.empty_like(self.hidden)
        m, top_k = self.topk_ids.shape
        # vLLM's workspace_shapes: (M, top_k, max(N1, K)) each; apply views what it needs from the flat buffers
        size = m * top_k * max(self.w13.shape[1], self.w13.shape[2])
        gated = self.kernel_kwargs["activation"] == "silu"
        kwargs: dict[str, Any] = dict(
            output=out, hidden_states=self.hidden, w1=self.w13, w2=self.w2, topk_weights=self.topk_weights,
            topk_ids=self.topk_ids, activation=MoEActivation.SILU if gated else MoEActivation.RELU2_NO_MUL,
            global_num_experts=self.w13.shape[0], expert_map=None, a1q_scale=None, a2_scale=self.experts.a2_scale,
            workspace13=self.hidden.new_empty(size), workspace2=self.hidden.new_empty(size), expert_tokens_meta=None,
            apply_router_weight_on_input=False,
        )  # fmt: skip
        kwargs.update(overrides)
        cls.apply(self.experts, **kwargs)
        return kwargs["output"]


def triton_experts(
    m: int,
    e: int,
    top_k: int,
    k: int,
    n: int,
    *,
    scales: str,
    gated: bool = True,
    device: str = "cpu",
    seed: int = 0,
    swiglu_limit: float | None = None,
    gemm1_clamp_limit: float | None = None,
) -> ExpertsCase:
    """`swiglu_limit`: the model's SwiGLU clamp (vLLM 0.32 FusedMoEConfig); `gemm1_clamp_limit`: the quant config's."""
    from vllm.model_executor.layers.fused_moe.activation import MoEActivation
    from vllm.model_executor.layers.fused_moe.config import (
        FusedMoEConfig,
        FusedMoEParallelConfig,
        RoutingMethodType,
        fp8_w8a8_moe_quant_config,
    )
    from vllm.model_executor.layers.fused_moe.experts.triton_moe import TritonExperts

    block = scales == "block-dynamic"
    (x, w13, w2, w, ids), kw = fused_moe_problem(
        m, e, top_k, k, n, scales="block" if block else "tensor", static=not block, gated=gated, seed=seed,
        device=device,
    )  # fmt: skip
    moe_config = FusedMoEConfig(
        num_experts=e, experts_per_token=top_k, hidden_dim=k, intermediate_size=n, num_local_experts=e,
        num_logical_experts=e, activation=MoEActivation.SILU, device=device,
        routing_method=RoutingMethodType.Renormalize, moe_parallel_config=FusedMoEParallelConfig.make_no_parallel(),
        in_dtype=torch.bfloat16, intermediate_size_per_partition=n, swiglu_limit=swiglu_limit,
    )  # fmt: skip
    if not gated:
        # vLLM's __post_init__ refuses non-gated activations off CUDA/XPU/ROCm; the field is what the experts read
        object.__setattr__(moe_config, "activation", MoEActivation.RELU2_NO_MUL)
    quant_config = fp8_w8a8_moe_quant_config(
        w1_scale=kw["w13_scale"], w2_scale=kw["w2_scale"], a1_scale=kw.get("a13_scale"), a2_scale=kw.get("a2_scale"),
        block_shape=kw["block_shape"], gemm1_clamp_limit=gemm1_clamp_limit,
    )  # fmt: skip
    return ExpertsCase(TritonExperts(moe_config, quant_config), x, w13, w2, w, ids, kw)
