"""A small bake of the real kernel for the tests of kernels/aot.py and kernels/triton_cache.py: one tuned tile for
Qwen3-30B-A3B TP1 at M=1, compiled for sm_90 with Triton 3.7.1 and vLLM 0.32's fused_moe.py (tests/triton_aot.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from kernels import config_files as cf
from kernels.shapes import shape_by_key
from tests import triton_aot
from tests.conftest_paths import REPO

SHAPE = shape_by_key("qwen3-30b-a3b:tp1")
TILE = dict(BLOCK_SIZE_M=16, BLOCK_SIZE_N=128, BLOCK_SIZE_K=128, GROUP_SIZE_M=1, num_warps=4, num_stages=4)

# Compiles the cases of the config folder argv[1] for M=1 and prints what Triton compiled and what it loaded.
COUNT_SCRIPT = """
import json, sys
from pathlib import Path
from triton.runtime.driver import driver
from kernels import aot
from kernels.shapes import shape_by_key
from tools.compile_counter import CompileCounter
driver.set_active(aot.Sm90Driver())
cases = aot.cases_from_configs(Path(sys.argv[1]), [1], [shape_by_key("qwen3-30b-a3b:tp1")])
with CompileCounter() as c:
    aot.compile_cases(cases, workers=1, progress=False)
print(json.dumps({"misses": c.misses, "hits": c.hits}))
"""


def bake_env(cache: Path) -> dict[str, str]:
    """Triton 3.7.1 compiling into ``cache``, with the bake reading vLLM 0.32's kernel source."""
    return triton_aot.env(cache, MOE_AOT_VLLM_FUSED_MOE_PY=str(triton_aot.vllm_fused_moe()))


def write_config(folder: Path, tile: dict[str, int]) -> Path:
    """A config folder holding SHAPE's tuned file with ``tile`` at M=1."""
    name = cf.config_file_name(SHAPE.e, SHAPE.n, SHAPE.dtype)
    cf.write_config_file(folder / name, {1: tile}, triton_aot.TRITON_VERSION)
    return folder


def run_python(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )


def last_json(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def compile_counts(config_dir: Path, env: dict[str, str]) -> dict[str, dict[str, int]]:
    """{"misses": ..., "hits": ...} per kernel name of COUNT_SCRIPT run under ``env``."""
    return last_json(run_python(["-c", COUNT_SCRIPT, str(config_dir)], env))
