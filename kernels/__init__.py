"""What the image ships for vLLM's Triton fused-MoE kernel: the tuned H200 tiles (configs/) and their lookup
(config_files.py), the model shapes (shapes.py), the ahead-of-time bake the image build runs (aot.py) and the
Triton cache manager every engine process loads (triton_cache.py). Nothing here imports tools, ops or benchmarks."""
