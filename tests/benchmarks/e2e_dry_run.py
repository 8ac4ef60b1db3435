"""The environment benchmarks/device/e2e.sh plans in without a GPU (DRY_RUN=1), shared by the tests that plan its
phases (test_e2e_phases.py) and the shipped queues' steps (test_queue_budgets.py)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path


def dry_run_env(tmp_path: Path, gpus: int, base: Mapping[str, str] = os.environ, **extra: str) -> dict[str, str]:
    """`base` with e2e.sh in its dry-run mode on the image's vLLM, `gpus` GPUs, and its output and work dirs under
    tmp_path; `extra` last."""
    return {
        **base,
        "DRY_RUN": "1",
        "GPUS": str(gpus),
        "PLAN_VLLM_VERSION": "0.32.0",  # the image's vLLM
        "OUT": str(tmp_path / "o"),
        "WORK_DIR": str(tmp_path / "w"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{base.get('PATH', os.environ['PATH'])}",
        **extra,
    }
