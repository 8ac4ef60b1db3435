"""`make test-gpu` (scripts/test_gpu.sh) collects only its GPU_TEST_PATHS: a GPU test anywhere else would never run."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest_paths import REPO

# any use of the marker: `pytestmark = ...`, a list over several lines, the decorator, `marks=pytest.mark.gpu`
GPU_MARK = re.compile(r"\bpytest\.mark\.gpu\b")


def gpu_test_paths() -> list[str]:
    text = (REPO / "scripts" / "test_gpu.sh").read_text()
    found = re.search(r"^GPU_TEST_PATHS=\(([^)]*)\)", text, re.MULTILINE)
    assert found, "scripts/test_gpu.sh lost its GPU_TEST_PATHS=(...) line"
    return found.group(1).split()


def test_every_gpu_test_lives_in_a_folder_make_test_gpu_collects() -> None:
    roots = [REPO / p for p in gpu_test_paths()]
    assert all(r.is_dir() or r.is_file() for r in roots), roots  # a folder, or one file of a CPU suite's folder
    this = Path(__file__).resolve()
    marked = [p for p in (REPO / "tests").rglob("test_*.py") if p.resolve() != this and GPU_MARK.search(p.read_text())]
    assert marked, "no GPU test found: the scan looks in the wrong place"
    outside = [str(p.relative_to(REPO)) for p in marked if not any(r == p or r in p.parents for r in roots)]
    assert not outside, f"GPU tests outside scripts/test_gpu.sh's GPU_TEST_PATHS (make test-gpu skips them): {outside}"
