"""benchmarks.e2e.profile_plot on the CSV profile_trace writes from two traces built like the torch profiler's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.e2e import profile_plot, profile_trace
from tests.benchmarks.test_profile_trace import STEP_US, trace


@pytest.fixture
def steps_csv(tmp_path: Path) -> Path:
    paths = []
    for name, step_us in (("fast", STEP_US), ("slow", STEP_US + 50.0)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps({"traceEvents": trace(steps=6, step_us=step_us)}))
    out = tmp_path / "steps.csv"
    argv = [
        *map(str, paths),
        "--label",
        "rep1",
        "--label",
        "rep2",
        "--out-csv",
        str(out),
        "--out-md",
        str(tmp_path / "s.md"),
    ]
    assert profile_trace.main(argv) == 0
    return out


def test_each_trace_is_its_classes_then_its_gaps(steps_csv: Path) -> None:
    traces = profile_plot.read_traces(steps_csv)
    assert list(traces) == ["rep1", "rep2"]
    # the fixture's step: 20 µs of vLLM's MoE GEMM, 10 attention, 2 norm, 15 dense GEMM, 5 sampling; gaps 48 / 98
    assert traces["rep1"] == {profile_plot.GAP: 48.0, "_kernels": 5.0, "moe_gemm_vllm": 20.0, "attention": 10.0,
                              "norm": 2.0, "dense_gemm": 15.0, "sampling": 5.0}  # fmt: skip
    assert traces["rep2"][profile_plot.GAP] == 98.0


def test_the_plot_is_written(steps_csv: Path, tmp_path: Path) -> None:
    png = tmp_path / "steps.png"
    assert profile_plot.main([str(steps_csv), "--png", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_another_csv_is_refused_naming_the_missing_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "h200_e2e.csv"
    other.write_text("model,backend,conc\nqwen,plan,1\n")
    assert profile_plot.main([str(other), "--png", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert "not a profile_trace CSV" in err and "'step_gap_us'" in err and "'us_per_step'" in err


def test_each_class_has_one_colour_in_the_stacking_order() -> None:
    assert len(profile_plot.CLASS_ORDER) == len(set(profile_plot.CLASS_ORDER))
    assert profile_plot.CLASS_ORDER[-1] == "other" and "norm" in profile_plot.CLASS_ORDER


def test_one_layer_runs_from_one_moe_gemm_start_to_the_next(tmp_path: Path) -> None:
    """Four MoE starts, three whole layers: the middle one is cut (its MoE GEMM start to the next), and drawn."""
    rows = ["trace,index,name,kernel_class,start_us,duration_us,exclusive_us"]
    for layer in range(4):
        t = 100.0 * layer
        rows += [f"x,0,rms_norm_kernel,norm,{t},2,2", f"x,0,moe_gemm1_kernel,moe_gemm_ours,{t + 10},11,11",
                 f"x,0,moe_gemm2_kernel,moe_gemm_ours,{t + 14},13,6",
                 f"x,0,flash_fwd,attention,{t + 40},10,10"]  # fmt: skip
    timeline = tmp_path / "profile_timeline.csv"
    timeline.write_text("\n".join(rows) + "\n")
    layer = profile_plot.layer_of(timeline)
    assert [(r["name"], r["start_us"]) for r in layer] == [
        ("moe_gemm1_kernel", "110.0"), ("moe_gemm2_kernel", "114.0"), ("flash_fwd", "140.0"),
        ("rms_norm_kernel", "200.0"), ("moe_gemm1_kernel", "210.0"),
    ]  # fmt: skip
    png = tmp_path / "layer.png"
    assert profile_plot.main([str(timeline), "--layer", "--png", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_a_timeline_without_a_moe_gemm_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    timeline = tmp_path / "t.csv"
    timeline.write_text("trace,index,name,kernel_class,start_us,duration_us,exclusive_us\nx,0,a,norm,0,1,1\n")
    assert profile_plot.main([str(timeline), "--layer", "--png", str(tmp_path / "x.png")]) == 2
    assert "no MoE GEMM kernel in the step" in capsys.readouterr().err
