"""Our own Triton kernels: the FP8 fused MoE (fused_moe_fp8, with its AOT bake in fused_moe_fp8_aot) and RoPE + FP8
quantisation. They ship in the wheel and the image: when the plan sets option.moe_kernel=project, the engine plugin
(entrypoint.moe_plugin) runs ops.fused_moe_fp8 inside vLLM's Triton experts at the batch sizes of the dispatch table.
Their float64 references and problem generators live apart, in kernel_checks/ (not shipped)."""
