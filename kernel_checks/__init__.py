"""What checks our kernels (ops/) and is never shipped: float64 references and random problem generators.

The tests (tests/ops, tests/entrypoint/moe_plugin), the kernel benchmarks (benchmarks/kernels) and the device
tools (tools/ours_aot_check.py) import it from the repository root; the wheel and the image leave it out
(pyproject's packages.find, .dockerignore), and lint-imports keeps shipped code from importing it.
"""
