"""Kernel-level benchmarks on an H200: vLLM's fused MoE with our tuned tiles, our own kernels (ops/), the sweep of
our kernel configs. Results go to benchmarks/results/kernels/."""
