"""Shared by the settings tests: a serving.properties file in a temporary directory, and a plan built from settings."""

from __future__ import annotations

from pathlib import Path

from tests.conftest_paths import REPO

QWEN = str(REPO / "tests/fixtures/models/qwen3-30b-a3b-fp8")


def props_file(tmp_path: Path, text: str, name: str = "serving.properties") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def plan_with(environ: dict[str, str], **kw):
    from entrypoint.inputs.gather import build_plan

    return build_plan(model=QWEN, gpu="H200", num_gpus=8, vllm_version="0.26.0", environ=environ, **kw)
