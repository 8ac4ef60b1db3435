"""vLLM's Triton experts with our kernel at the token counts the dispatch table gives (entrypoint.moe_plugin).

How it fits vLLM 0.32's modular kernel (fused_moe/modular_kernel.py, experts/triton_moe.py; 0.26 the same way):
- An eligible layer answers `expects_unquantized_inputs` with True, so the prepare step (FusedMoEKernel._prepare
  passes it as `defer_input_quant`) hands `apply` the bf16 activations; our kernel quantises them itself (static
  scale or dynamic), and vLLM's own `apply` does exactly the quantisation the prepare step would have done when it
  sees unquantised inputs (its LoRA + all-to-all path).
- `apply` runs ops.fused_moe_fp8 into `output` when the row lists this M, else vLLM's `apply`. On CUDA the MoE layer
  runs inside vLLM's opaque `moe_forward` custom op (runner/moe_runner.py MoERunner._select_forward), so
  torch.compile never traces this Python; CUDA graphs are captured per batch size, so each captured size holds one
  kernel's launches and the choice costs nothing on replay. Nothing here reads a device tensor on the host.
- Eligible: FP8 w8a8 with a scale kind our kernel was measured on (kernels.dispatch.SCALE_KINDS), SiLU or relu²,
  no LoRA, no biases, no SwiGLU clamp (0.32 also takes it from the model: FusedMoEFactory(swiglu_limit=...)), no
  all-to-all dispatch (deferring the quantisation would send bf16 over it), and a table row for the layer's shape on
  this GPU. Everything else keeps vLLM's path untouched.
- Padding rows: under VLLM_MOE_SKIP_PADDING (on by default from 0.32; 0.26 had it off) vLLM's routers give the
  CUDA-graph and DP padding rows expert id -1 (router/fused_topk_router.py `_get_padding_mask`,
  grouped_topk_router.py); our kernel gives a negative id weight 0 itself, so no masking kernels run per layer.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

import torch

from entrypoint.moe_plugin.fold_routing import PENDING, ROW_OF
from kernels.dispatch import DispatchKey, DispatchRow, DispatchTable
from ops.fused_moe_fp8 import (
    LogitsRouting,
    MoEKernelConfig,
    call_config,
    candidate_configs,
    default_config,
    fused_moe_fp8,
    route,
)

_ROW = "_moe_serving_row"  # per instance: the DispatchRow, or None when not eligible (decided once)
# per instance, set while vLLM's apply runs on an input the prepare step already quantised: a TritonExperts held by
# another experts class (vLLM's FallbackExperts, e.g. TritonOrDeepGemmExperts under VLLM_USE_DEEP_GEMM=1) is asked
# by that wrapper, whose own expects_unquantized_inputs is False; vLLM's apply must then see the original answer
_QUANTISED_CALL = "_moe_serving_quantised_call"
_ACTIVATIONS = {"silu": "silu", "relu2_no_mul": "relu2"}  # vLLM's MoEActivation value → our kernel's name


def kernel_activation(activation: Any) -> str:
    """Our kernel's name for vLLM's MoEActivation ("" where our kernel has none)."""
    return _ACTIVATIONS.get(getattr(activation, "value", ""), "")


def scale_kind(experts: Any) -> str | None:
    """Which of kernels.dispatch.SCALE_KINDS this layer's FP8 scales are, or None."""
    qc = experts.quant_config
    if not qc.use_fp8_w8a8 or experts.per_act_token_quant:
        return None
    block = experts.block_shape
    if block is not None:
        return "block-dynamic" if list(block) == [128, 128] and experts.a1_scale is None else None
    w1_scale, a1_scale, a2_scale = experts.w1_scale, experts.a1_scale, experts.a2_scale
    per_tensor = w1_scale is not None and w1_scale.numel() == experts.moe_config.num_local_experts
    static = a1_scale is not None and a1_scale.numel() == 1 and a2_scale is not None and a2_scale.numel() == 1
    return "tensor-static" if per_tensor and static else None


def ineligible_because(experts: Any) -> str | None:
    """Why this layer keeps vLLM's kernel at every M, or None when the table decides."""
    cfg = experts.moe_config
    if scale_kind(experts) is None:
        return "not an FP8 scale kind our kernel was measured on"
    if cfg.activation.value not in _ACTIVATIONS:
        return f"activation {cfg.activation.value}"
    if cfg.is_lora_enabled or getattr(experts, "_lora_context", None) is not None:
        return "LoRA"
    if cfg.has_bias or experts.w1_bias is not None or experts.w2_bias is not None:
        return "expert biases"
    if _clamp_limit(experts) is not None:
        return "a SwiGLU clamp"
    if cfg.moe_parallel_config.use_all2all_kernels:
        return "all-to-all dispatch"
    return None


def _clamp_limit(experts: Any) -> float | None:
    """The SwiGLU clamp vLLM's activation applies: 0.32's ApplyMoEActivationConfig (fused_moe/activation.py
    from_configs: the quant config's gemm1_clamp_limit, else the model's swiglu_limit); 0.26 has only the former."""
    config = getattr(experts, "activation_config", None)
    if config is not None:
        return config.clamp_limit
    return experts.quant_config.gemm1_clamp_limit


def layer_key(experts: Any) -> DispatchKey:
    cfg = experts.moe_config
    kind = scale_kind(experts)
    assert kind is not None
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    return DispatchKey.of(
        cfg.num_local_experts, cfg.intermediate_size_per_partition, cfg.hidden_dim, cfg.experts_per_token, kind, device
    )


def _decide(experts: Any, table: DispatchTable, logger: logging.Logger, logged: set[str]) -> DispatchRow | None:
    why = ineligible_because(experts)
    row = None
    if why is None:
        key = layer_key(experts)
        row = table.row(key)
        note = (
            f"{key.label()}: ops.fused_moe_fp8 at {row.describe_ranges()}, vLLM's Triton kernel elsewhere"
            if row
            else f"{key.label()}: no row in {table.source}, vLLM's Triton kernel at every M"
        )
    else:
        note = f"a {type(experts).__name__} layer keeps vLLM's kernel: {why}"
    if note not in logged:  # once per shape and process, not once per layer
        logged.add(note)
        logger.info("moe_kernel=project: %s", note)
    return row


def patch(cls: type, table: DispatchTable, logger: logging.Logger, *, gemm1_pdl: bool = False) -> None:
    """Replace cls.expects_unquantized_inputs and cls.apply with the dispatching versions (see the module doc).
    gemm1_pdl: our first GEMM launched under PDL behind the kernel before it (MoEKernelConfig.pdl_gemm1)."""
    original_expects = cls.expects_unquantized_inputs  # a property (entrypoint.moe_plugin.hook.find_hook checks)
    original_apply = cls.apply
    logged: set[str] = set()

    def row_of(self: Any) -> DispatchRow | None:
        if _ROW not in self.__dict__:
            self.__dict__[_ROW] = _decide(self, table, logger, logged)
        return self.__dict__[_ROW]

    def expects_unquantized_inputs(self: Any) -> bool:
        if original_expects.fget(self):
            return True
        return row_of(self) is not None and not self.__dict__.get(_QUANTISED_CALL, False)

    def apply(
        self: Any,
        output: torch.Tensor,
        hidden_states: torch.Tensor,
        w1: torch.Tensor,
        w2: torch.Tensor,
        topk_weights: torch.Tensor,
        topk_ids: torch.Tensor,
        activation: Any,
        global_num_experts: int,
        expert_map: torch.Tensor | None,
        a1q_scale: torch.Tensor | None,
        a2_scale: torch.Tensor | None,
        workspace13: torch.Tensor,
        workspace2: torch.Tensor,
        expert_tokens_meta: Any,
        apply_router_weight_on_input: bool,
    ) -> None:
        row = row_of(self)
        name = kernel_activation(activation)
        routing = self.__dict__.pop(PENDING, None)  # fold_routing: the top-k buffers are ours to fill
        if (
            row is not None
            and a1q_scale is None
            and hidden_states.dtype in (torch.bfloat16, torch.float16)
            and row.uses_project_kernel(hidden_states.size(0), name)
        ):
            run_project_kernel(
                self, output, hidden_states, w1, w2, topk_weights, topk_ids, name, expert_map,
                a2_scale, apply_router_weight_on_input, row.kernel_config(hidden_states.size(0)), routing,
                gemm1_pdl=gemm1_pdl,
            )  # fmt: skip
            return
        if routing is not None:  # fold_routing decided for our kernel, but it does not run: route for vLLM's kernel
            route(routing, topk_weights, topk_ids)
        quantised = a1q_scale is not None
        if quantised:
            self.__dict__[_QUANTISED_CALL] = True
        try:
            original_apply(
                self, output=output, hidden_states=hidden_states, w1=w1, w2=w2, topk_weights=topk_weights,
                topk_ids=topk_ids, activation=activation, global_num_experts=global_num_experts, expert_map=expert_map,
                a1q_scale=a1q_scale, a2_scale=a2_scale, workspace13=workspace13, workspace2=workspace2,
                expert_tokens_meta=expert_tokens_meta, apply_router_weight_on_input=apply_router_weight_on_input,
            )  # fmt: skip
        finally:
            if quantised:
                self.__dict__[_QUANTISED_CALL] = False

    cls.expects_unquantized_inputs = property(expects_unquantized_inputs, doc=original_expects.__doc__)
    cls.apply = apply
    setattr(cls, ROW_OF, row_of)  # fold_routing asks each layer's row (bound: instance.ROW_OF())


def pair_mode_at(row: DispatchRow, num_tokens: int) -> bool:
    """Whether our kernel runs this many tokens in PAIR mode (one program row per (token, slot)) for this row."""
    tuned = row.kernel_config(num_tokens)
    if tuned:
        return MoEKernelConfig(**tuned).pair_mode
    key = row.key
    return default_config(num_tokens, key.experts, key.top_k, key.hidden, key.n).pair_mode


def logits_routing(
    logits: torch.Tensor, top_k: int, scoring: str = "softmax", renormalize: bool = True,
    bias: torch.Tensor | None = None, scale: float = 1.0, is_padding: torch.Tensor | None = None,
) -> LogitsRouting:  # fmt: skip
    """The routing our kernel computes from a router's logits (fold_routing builds it; ops stays behind this module)."""
    return LogitsRouting(logits, top_k, scoring, renormalize, bias=bias, scale=scale, is_padding=is_padding)


def project_kernel() -> tuple[Callable[..., Any], Callable[..., list[MoEKernelConfig]]]:
    """Our kernel and its config sweep for the bake-time tune (entrypoint/caches/tune_layer.py), which races them
    against vLLM's kernel to write this plugin's dispatch rows: the plugin stays the one way into ops."""
    return fused_moe_fp8, candidate_configs


def run_project_kernel(
    experts: Any,
    output: torch.Tensor,
    hidden_states: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    activation: str,
    expert_map: torch.Tensor | None,
    a2_scale: torch.Tensor | None,
    apply_router_weight_on_input: bool,
    config: Mapping[str, Any] | None = None,
    routing: LogitsRouting | None = None,
    *,
    gemm1_pdl: bool = False,
) -> None:
    """vLLM's apply contract, computed by ops.fused_moe_fp8: `output` (M, K) gets Σ_k w · expert(x).

    routing (fold_routing): route from the router's logits inside our kernel, which writes topk_weights and
    topk_ids (the buffers the router handed on); never with an expert map or weights applied on the input.
    gemm1_pdl: the config (tuned or default) with pdl_gemm1 set (an experimental switch, GEMM1_PDL_ENV)."""
    # Padding rows (VLLM_MOE_SKIP_PADDING) come with id -1: the kernel itself gives a negative id weight 0, so no
    # masking kernels run here (three launches per layer and decode step fewer than the host-side mask, issue 33)
    ids, weights = topk_ids, topk_weights
    if routing is not None and (expert_map is not None or apply_router_weight_on_input):
        route(routing, topk_weights, topk_ids)  # fold_routing never asks for this; stay correct if it ever does
        routing = None
    if apply_router_weight_on_input:
        weights = torch.ones_like(topk_weights)  # the prepare step already scaled the input (top-k = 1)
    if expert_map is not None:  # expert parallelism: global ids → this rank's, -1 where another rank holds it
        ids = torch.where(topk_ids < 0, -1, expert_map[topk_ids.clamp_min(0).long()])
    static = experts.block_shape is None
    kernel_config = MoEKernelConfig(**config) if config else None
    if gemm1_pdl:
        chosen = call_config(hidden_states, w2, topk_ids.size(1), experts.block_shape, kernel_config)
        kernel_config = dataclasses.replace(chosen, pdl_gemm1=True)
    fused_moe_fp8(
        hidden_states, w1, w2, weights, ids,
        w13_scale=experts.w1_scale, w2_scale=experts.w2_scale,
        a13_scale=experts.a1_scale.reshape(1) if static else None,
        a2_scale=a2_scale.reshape(1) if static and a2_scale is not None else None,
        block_shape=experts.block_shape, activation=activation, out=output,
        config=kernel_config, routing=routing,
    )  # fmt: skip
