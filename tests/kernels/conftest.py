"""The baked cache the aot and triton_cache tests share (one bake per session: ~5 s of sm_90 compiles), and vLLM's
own config lookup for the shipped-config tests (``vllm_lookup``, tests/vllm_moe_lookup.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.kernels.bake import SHAPE, TILE, bake_env, last_json, run_python, write_config
from tests.vllm_moe_lookup import vllm_lookup  # noqa: F401 (a fixture, found here by name)


@pytest.fixture(scope="session")
def baked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str], dict[str, Any]]:
    """(cache dir, config dir, the bake's environment, the bake's JSON summary) of `python -m kernels.aot bake`."""
    root = tmp_path_factory.mktemp("aot")
    cache, cfg = root / "cache", write_config(root / "cfg", TILE)
    env = bake_env(cache)
    args = ["-m", "kernels.aot", "bake", "--cache-dir", str(cache), "--config-dir", str(cfg)]
    args += ["--batch-sizes", "1", "--max-tokens", "0", "--shapes", SHAPE.key, "--workers", "1"]
    return cache, cfg, env, last_json(run_python(args, env))
