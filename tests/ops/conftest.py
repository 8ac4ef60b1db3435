"""Kernel tests run on the GPU when there is one, else on the CPU under Triton's interpreter.

TRITON_INTERPRET must be set before the kernel modules are imported (triton.jit reads it when it
decorates), hence at conftest import time.
"""

from __future__ import annotations

import os

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
