"""Scripts and diagnostics that run on the H200 host (shell entry points, and Python diagnostics run as
``python3 -m benchmarks.device.<name>``)."""
