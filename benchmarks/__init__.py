"""Benchmarks of the serving container, never shipped: kernel-level timings on the H200 (``benchmarks.kernels``),
end-to-end engine runs (``benchmarks.e2e``), the LMI middleware (``benchmarks.serving``) and the scripts a GPU
lease runs (``benchmarks/device/``). Their evidence is filed under ``benchmarks/results/`` (benchmarks/paths.py).
Benchmarks import kernels, ops, tools and entrypoint; nothing imports benchmarks except the tests."""
