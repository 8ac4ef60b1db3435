"""The e2e harness's backend names → the engines they start, and where the plan row's decision comes from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.e2e import backends as be
from benchmarks.e2e import cli, spec
from entrypoint.resolve.vllm_caps import PINNED_VLLM_VERSION

QWEN = spec.MoEShape(128, 768, 8, None)


def _tuned_dir(tmp_path: Path, *names: str) -> Path:
    d = tmp_path / "configs"
    d.mkdir()
    for n in names:
        (d / n).write_text("{}")
    return d


def test_fixed_backends_map_to_engine_kwargs_and_environment(tmp_path: Path) -> None:
    tuned = _tuned_dir(tmp_path, "E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json")
    setups = {s.backend: s for s in be.engine_setups(
        ["auto", "triton", "triton_tuned", "flashinfer_cutlass"], tmp_path, QWEN, None, tuned)}  # fmt: skip
    assert setups["auto"].engine_kwargs() == {} and be.TUNED_ENV in setups["auto"].unset_env
    assert setups["triton"].engine_kwargs() == {"moe_backend": "triton"}
    assert be.TUNED_ENV in setups["triton"].unset_env  # vLLM's shipped tiles only
    assert setups["triton_tuned"].env == {be.TUNED_ENV: str(tuned)}
    assert setups["triton_tuned"].same_engine_as is None  # a file matches: a different engine
    assert setups["flashinfer_cutlass"].engine_kwargs() == {"moe_backend": "flashinfer_cutlass"}


def test_tuned_backend_without_a_matching_file_reuses_the_triton_engine(tmp_path: Path) -> None:
    # A block-FP8 file must not count for the per-tensor model, nor another E/N.
    tuned = _tuned_dir(
        tmp_path,
        "E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json",
        "E=128,N=1856,device_name=NVIDIA_H200,dtype=fp8_w8a8.json",
    )
    setups = be.engine_setups(["triton", "triton_tuned"], tmp_path, QWEN, None, tuned)
    assert setups[1].same_engine_as == "triton"
    assert "no file E=128,N=768," in setups[1].note
    block = spec.MoEShape(128, 768, 8, (128, 128))
    assert [p.name for p in be.tuned_files_for(block, tuned)] == [
        "E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json"
    ]


def test_plan_backend_follows_the_resolver_and_dedupes(tmp_path: Path) -> None:
    tuned = _tuned_dir(tmp_path, "E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json")

    def provider(model_dir: Path) -> be.PlanDecision:
        return be.PlanDecision("triton", {be.TUNED_ENV: "/opt/image/kernels/configs"}, "test")

    setups = be.engine_setups(["triton_tuned", "plan"], tmp_path, QWEN, provider, tuned)
    plan = setups[1]
    assert plan.engine_kwargs() == {"moe_backend": "triton"}
    assert plan.env[be.TUNED_ENV] == str(tuned)  # image path remapped to the repo's folder
    assert plan.same_engine_as == "triton_tuned"


def test_the_plan_without_our_kernel_is_its_own_row_and_no_comparison_row_keeps_the_plugin(tmp_path: Path) -> None:
    tuned = _tuned_dir(tmp_path, "E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json")

    def provider(model_dir: Path) -> be.PlanDecision:
        return be.PlanDecision("triton", {be.TUNED_ENV: str(tuned), be.KERNEL_ENV: "project"}, "test")

    names = ["plan", "plan_vllm_kernel", "triton_tuned", "triton", "auto"]
    plan, without, tuned_row, triton, auto = be.engine_setups(names, tmp_path, QWEN, provider, tuned)
    assert plan.env[be.KERNEL_ENV] == "project"
    assert be.KERNEL_ENV not in without.env and be.KERNEL_ENV in without.unset_env
    assert without.env[be.TUNED_ENV] == str(tuned) and without.engine_kwargs() == {"moe_backend": "triton"}
    assert without.same_engine_as is None  # the plugin makes them different engines
    assert tuned_row.same_engine_as == "plan_vllm_kernel"  # the plan without the plugin is triton_tuned
    assert all(be.KERNEL_ENV in row.unset_env for row in (tuned_row, triton, auto))


def test_the_fold_row_is_the_plan_with_the_fold_switch_and_a_separate_engine(tmp_path: Path) -> None:
    def provider(model_dir: Path) -> be.PlanDecision:
        return be.PlanDecision("triton", {be.KERNEL_ENV: "project"}, "test")

    plan, fold, pdl, pdl_alone = be.engine_setups(
        ["plan", "plan_fold", "plan_fold_pdl", "plan_pdl"], tmp_path, QWEN, provider
    )
    assert be.FOLD_ENV not in plan.env and be.GEMM1_PDL_ENV not in plan.env
    assert fold.env == {be.KERNEL_ENV: "project", be.FOLD_ENV: "1"} and fold.same_engine_as is None
    assert fold.engine_kwargs() == plan.engine_kwargs() and "comparison row" in fold.note
    # the fold with GEMM1 under PDL: one switch more, its own engine
    assert pdl.env == {**fold.env, be.GEMM1_PDL_ENV: "1"} and pdl.same_engine_as is None
    assert f"{be.GEMM1_PDL_ENV}=1" in pdl.note
    # GEMM1 under PDL without the fold: behind vLLM's top-k
    assert pdl_alone.env == {be.KERNEL_ENV: "project", be.GEMM1_PDL_ENV: "1"} and pdl_alone.same_engine_as is None


def test_a_resolver_refusal_becomes_an_error_row_not_a_crash(tmp_path: Path) -> None:
    def provider(model_dir: Path) -> be.PlanDecision:
        raise ValueError("no FP8 on this CPU")

    (plan,) = be.engine_setups(["plan"], tmp_path, QWEN, provider)
    assert plan.error == "ValueError: no FP8 on this CPU"


def test_plan_snapshot_is_used_when_the_resolver_is_not_importable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snap = tmp_path / "plans.json"
    snap.write_text(json.dumps({"plans": {"qwen3-30b-a3b-fp8-static": {"moe_backend": "triton", "env": {}}}}))
    monkeypatch.setitem(__import__("sys").modules, "entrypoint.inputs.gather", None)  # import now fails
    provider, note = be.make_plan_provider(snap, None)
    assert provider is not None and "plan snapshot" in note and "not the" not in note
    # a snapshot made for another vLLM than the run asks for says so in the run's log
    _, mismatch = be.make_plan_provider(snap, None, "0.32.0")
    assert "the snapshot plans for vLLM unknown, not the 0.32.0 asked" in mismatch
    decision = provider(spec.resolve_model_dir("qwen3-30b-a3b-fp8-static"))
    assert decision.moe_backend == "triton" and decision.source == "snapshot:plans.json"
    with pytest.raises(ValueError, match="no entry for mixtral-8x7b-fp8-static"):
        provider(spec.resolve_model_dir("mixtral-8x7b-fp8-static"))


def test_the_offline_plan_row_plans_for_the_vllm_the_run_names(monkeypatch: pytest.MonkeyPatch) -> None:
    # plan_from_resolver asked for vLLM 0.26.0 whatever the run said, after the image had moved to 0.32.0 (the two
    # plans of the bundled models are alike, so the resolver is asked directly what it was given)
    from entrypoint.inputs import gather

    asked: list[str | None] = []
    real_build_plan = gather.build_plan

    def build_plan(**kwargs: object) -> object:
        asked.append(kwargs.get("vllm_version"))  # type: ignore[arg-type]
        return real_build_plan(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(gather, "build_plan", build_plan)
    for version in ("0.26.0", None):
        provider, note = be.make_plan_provider(None, "H200", version)
        assert provider is not None and note.startswith("resolver")
        decision = provider(spec.resolve_model_dir("qwen3-30b-a3b-fp8-static"))
        assert decision.moe_backend == "triton"
    assert asked == ["0.26.0", None]  # None: the installed vLLM, as `serve` plans
    assert decision.source == "resolver gpu=H200"


def test_the_plan_snapshot_is_for_the_images_vllm_with_the_repositorys_folders_relative(tmp_path: Path) -> None:
    out = tmp_path / "plans.json"
    assert cli.main(["plans", "--out", str(out)]) == 0
    snapshot = json.loads(out.read_text())
    assert snapshot["vllm"] == PINNED_VLLM_VERSION and snapshot["gpu"] == "H200"
    qwen = snapshot["plans"]["qwen3-30b-a3b-fp8-static"]
    assert qwen["moe_backend"] == "triton" and qwen["env"][be.KERNEL_ENV] == "project"
    assert qwen["env"][be.TUNED_ENV] == "kernels/configs"  # read on another machine: no path of this checkout
    assert str(be.REPO_ROOT) not in out.read_text()
    # the committed snapshot is what the command writes today
    assert json.loads((be.REPO_ROOT / "benchmarks/results/e2e/plans.json").read_text()) == snapshot


def test_a_snapshots_relative_tile_folder_is_the_repositorys_wherever_the_run_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # not the repository's root: "kernels/configs" would not resolve from here
    (plan,) = be.engine_setups(
        ["plan"], tmp_path, QWEN, lambda _d: be.PlanDecision("triton", {be.TUNED_ENV: "kernels/configs"}, "t")
    )
    assert plan.env[be.TUNED_ENV] == str(be.REPO_ROOT / "kernels" / "configs") and "->" not in plan.note
