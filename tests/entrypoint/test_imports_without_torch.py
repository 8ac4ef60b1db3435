"""The planning side, the deploy tool and the lab's harness import without torch: they run where only the GPU
worker has it (the e2e harness's `python3` on a dev machine, the deploy tool on a laptop). The engine plugin's
modules keep torch inside the functions vLLM calls; an `import torch` at the top of one of them breaks these."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest_paths import REPO

MODULES = (
    "entrypoint.moe_plugin",
    "entrypoint.moe_plugin.fold_routing",
    "entrypoint.inputs.gather",
    "entrypoint.config_resolver",
    "sagemaker_deploy.instance_plan",
    "benchmarks.e2e.backends",
    "benchmarks.e2e.cli",
)


@pytest.mark.parametrize("module", MODULES)
def test_imports_with_torch_absent(module: str) -> None:
    code = f"import sys; sys.modules['torch'] = None; import {module}"  # None: `import torch` raises ImportError
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
