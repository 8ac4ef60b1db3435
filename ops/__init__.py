"""Our own Triton kernels (FP8 fused MoE, RoPE + FP8 quantisation), their float64 references and problem
generators. Not in the engine yet, so not in the image."""
