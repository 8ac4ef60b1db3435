"""Where benchmark evidence lives: ``benchmarks/results/<suite>/`` (CSVs, tables, plots, raw logs, RUNS.md), apart
from the code that produced it, so code folders hold code and the build context needs no exclusions."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
KERNEL_RESULTS = RESULTS / "kernels"  # benchmarks/kernels/*, benchmarks/device/{kernels_check,tune}_and_bench.sh
E2E_RESULTS = RESULTS / "e2e"  # python -m benchmarks.e2e (and its plans.json snapshot)
SERVING_RESULTS = RESULTS / "serving"  # benchmarks/serving/*
