"""Triton MoE kernels for the image: tuned vLLM tiles (configs/), AOT cache (aot.py), tuner, our own kernels."""
