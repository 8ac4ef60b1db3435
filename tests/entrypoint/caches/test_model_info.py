"""entrypoint.caches.model_info on the real (CPU) vLLM: the bake writes vLLM's own entries, `seed` copies what a
run-time cache lacks, and vLLM then takes the class's info from the cache instead of a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from entrypoint.caches import model_info
from tests.conftest_paths import REPO

QWEN3_ENTRY = "vllm-model_executor-models-qwen3_moe-Qwen3MoeForCausalLM.json"

# In a fresh process (vLLM reads VLLM_CACHE_ROOT when it looks for an entry): the subprocess vLLM would start to
# inspect the class raises instead, so the call succeeds only from the cache.
INSPECT_WITHOUT_SUBPROCESS = """
from vllm.model_executor.models import registry
def no_subprocess(fn):
    raise SystemExit("vLLM started its model-inspection subprocess: no usable cache entry")
registry._run_in_subprocess = no_subprocess
info = registry.ModelRegistry.models["Qwen3MoeForCausalLM"].inspect_model_cls()
print("text generation:", info.is_text_generation_model)
"""


def _python(code_or_args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *code_or_args], cwd=REPO, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=300)  # fmt: skip


@pytest.fixture(scope="module")
def baked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("baked")
    made = _python(["-m", "entrypoint.caches.model_info", "bake", "--out", str(root)], {"VLLM_LOGGING_LEVEL": "ERROR"})
    assert made.returncode == 0, made.stderr[-2000:]
    assert "model info: " in made.stdout and " entries for " in made.stdout
    return root


def test_the_bake_writes_vllms_entry_for_the_moe_architectures(baked: Path) -> None:
    entry = json.loads((baked / "modelinfos" / QWEN3_ENTRY).read_text())
    assert entry["modelinfo"]["is_text_generation_model"] is True and len(entry["hash"]) > 8
    assert set(model_info.REQUIRED) <= model_info.baked_architectures(baked)
    entries = list((baked / "modelinfos").glob("*.json"))
    assert len(entries) > 100  # every architecture that imports here
    # readable by any user (the image runs as any uid): vLLM itself writes them 0600
    assert all(p.stat().st_mode & 0o044 == 0o044 for p in entries)


def test_vllm_takes_a_seeded_entry_instead_of_its_subprocess(baked: Path, tmp_path: Path) -> None:
    env = {model_info.BAKED_ENV: str(baked), "VLLM_CACHE_ROOT": str(tmp_path / "run")}
    # without the entry, vLLM would inspect in a subprocess: the check can fail
    before = _python(["-c", INSPECT_WITHOUT_SUBPROCESS], env)
    assert before.returncode != 0 and "model-inspection subprocess" in before.stderr
    line = model_info.seed(env)
    assert line.startswith("model info: ") and " baked entries copied into " in line
    after = _python(["-c", INSPECT_WITHOUT_SUBPROCESS], env)
    assert after.returncode == 0 and "text generation: True" in after.stdout, after.stderr[-2000:]


def test_an_entry_already_in_the_run_time_cache_wins(baked: Path, tmp_path: Path) -> None:
    target = tmp_path / "run" / "modelinfos"
    target.mkdir(parents=True)
    (target / QWEN3_ENTRY).write_text('{"hash": "the run-time one"}')
    line = model_info.seed({model_info.BAKED_ENV: str(baked), "VLLM_CACHE_ROOT": str(tmp_path / "run")})
    baked_count = len(list((baked / "modelinfos").glob("*.json")))
    assert f"model info: {baked_count - 1} baked entries copied" in line
    assert (target / QWEN3_ENTRY).read_text() == '{"hash": "the run-time one"}'


def test_without_a_baked_cache_each_case_says_why(tmp_path: Path) -> None:
    assert "MOE_BAKED_MODEL_INFO is not set" in model_info.seed({"VLLM_CACHE_ROOT": str(tmp_path)})
    missing = {model_info.BAKED_ENV: str(tmp_path / "none"), "VLLM_CACHE_ROOT": str(tmp_path / "run")}
    assert f"no baked cache at {tmp_path / 'none' / 'modelinfos'}" in model_info.seed(missing)
    assert "VLLM_CACHE_ROOT is not set" in model_info.seed({model_info.BAKED_ENV: str(tmp_path)})
    assert not (tmp_path / "run").exists()  # nothing written when nothing is seeded
