"""`python -m benchmarks.e2e prepare`: what every run of a work dir shares, made once (the queues' first step). Here
with the CPU build of vLLM: FlashInfer is not installed, so its JIT fails for real, and vLLM's model info bakes."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.e2e.cli import main
from benchmarks.e2e.runner import MODEL_INFO_MARKER


def test_prepare_bakes_the_model_info_once_and_a_second_prepare_reuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["prepare", "--work-dir", str(tmp_path), "--timeout-s", "120"]) == 0
    assert (tmp_path / "model-info" / MODEL_INFO_MARKER).is_file()
    assert "ready in" in capsys.readouterr().out
    assert main(["prepare", "--work-dir", str(tmp_path), "--timeout-s", "120"]) == 0
    assert "model info: reused from this work dir" in capsys.readouterr().out


def test_prepare_that_makes_nothing_says_so_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a budget too short for either: both time out for real
    assert main(["prepare", "--work-dir", str(tmp_path), "--timeout-s", "0.01"]) == 1
    assert "nothing made" in capsys.readouterr().out
