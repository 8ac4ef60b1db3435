#!/usr/bin/env bash
# `make test-gpu`: every GPU test, on a host with an NVIDIA GPU (the H200 device runs this same script).
# The GPU tests live only in these folders (tests/test_gpu_paths.py fails on one elsewhere): collecting the whole
# tree would import the CPU-only suites' dependencies (moto, boto3, ...), which a GPU host need not have.
set -euo pipefail
cd "$(dirname "$0")/.."
GPU_TEST_PATHS=(tests/ops tests/entrypoint/moe_plugin tests/benchmarks/test_routing.py)
exec "${PY:-python3}" -m pytest -q -p no:cacheprovider -m gpu "${GPU_TEST_PATHS[@]}" "$@"
