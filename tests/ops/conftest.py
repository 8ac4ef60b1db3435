"""Kernel tests run on the GPU when there is one, else on the CPU under Triton's interpreter.

TRITON_INTERPRET must be set before the kernel modules are imported (triton.jit reads it when it
decorates), hence at conftest import time (tests/benchmarks/conftest.py imports this module for the same reason).

Tests marked ``gpu`` need a CUDA device. `make test` deselects them (-m "not gpu"); a run that selects them
(`make test-gpu`, `pytest -m gpu`) on a host where torch sees no GPU fails instead of skipping: on the H200 a
broken driver or a hidden device would otherwise report "41 skipped" and check nothing. Any other run skips them.
"""

from __future__ import annotations

import os
import re

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ["TRITON_INTERPRET"] = "1"
    from tests.ops.interpreter_fix import patch_fp8_downcast

    patch_fp8_downcast()

DEVICE = "cuda" if HAS_CUDA else "cpu"


@pytest.fixture
def device() -> str:
    return DEVICE


def _gpu_selected(markexpr: str) -> bool:
    """The -m expression asks for gpu tests (``gpu``, ``gpu and not slow``), not only lets them through."""
    return re.search(r"(?<!not )\bgpu\b", markexpr) is not None


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("gpu") is None or HAS_CUDA:
        return
    if _gpu_selected(item.config.getoption("markexpr") or ""):
        pytest.fail("selected with -m gpu, but torch sees no CUDA device: this run would check nothing", pytrace=False)
    pytest.skip("needs an NVIDIA GPU (make test-gpu)")
