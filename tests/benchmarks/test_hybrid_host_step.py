"""benchmarks.e2e.hybrid_host_step: the tiny hybrid keeps Nemotron's layer pattern, a real CPU vLLM engine serves it in
the Mamba cache mode the condition names, and every phase is timed into the CSV, the table and the plot."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from benchmarks.e2e import hybrid_host_step as hhs


def test_the_tiny_hybrid_keeps_nemotrons_layer_pattern_with_mlp_for_moe() -> None:
    real = json.loads(hhs.NEMOTRON_CONFIG.read_text())
    tiny = hhs.tiny_config(hhs.CONDITIONS[0])
    pattern = tiny["hybrid_override_pattern"]
    assert len(pattern) == tiny["num_hidden_layers"] == real["num_hidden_layers"] == 52
    assert (pattern.count("M"), pattern.count("*"), pattern.count("-"), pattern.count("E")) == (23, 6, 23, 0)
    assert [i for i, ch in enumerate(pattern) if ch == "M"] == [
        i for i, ch in enumerate(real["hybrid_override_pattern"]) if ch == "M"
    ]
    assert "auto_map" not in tiny and tiny["architectures"] == ["NemotronHForCausalLM"]


def test_the_reference_is_qwen3s_48_moe_layers_in_bf16_at_the_same_widths() -> None:
    hybrid, reference = hhs.tiny_config(hhs.CONDITIONS[1]), hhs.tiny_config(hhs.CONDITIONS[2])
    assert reference["architectures"] == ["Qwen3MoeForCausalLM"] and reference["num_hidden_layers"] == 48
    assert "quantization_config" not in reference and reference["num_experts"] == 16
    assert all(reference[k] == hybrid[k] == v for k, v in hhs.TINY_WIDTHS.items())


def test_the_derived_rows_subtract_the_timed_phases_and_the_forward() -> None:
    medians = {"schedule": 10.0, "_update_states": 5.0, "_prepare_inputs": 20.0, "_build_attention_metadata": 30.0,
               "_preprocess": 1.0, "_model_forward": 60.0, "execute_model": 130.0, "sample_tokens": 7.0,
               "update_from_output": 3.0}  # fmt: skip
    before = dict(medians)
    derived = hhs.derive(medians)
    assert derived[hhs.EXECUTE_REST] == 130.0 - (5 + 20 + 30 + 1 + 60)  # no preprocess_mamba in `none` mode
    assert derived[hhs.HOST_OUTSIDE_FORWARD] == 10 + 130 + 7 + 3 - 60
    with_copies = hhs.derive({**medians, "preprocess_mamba": 4.0})
    assert with_copies[hhs.EXECUTE_REST] == derived[hhs.EXECUTE_REST] - 4.0
    assert with_copies[hhs.HOST_OUTSIDE_FORWARD] == derived[hhs.HOST_OUTSIDE_FORWARD]  # inside execute_model
    assert medians == before  # the run's own medians are left alone


def test_the_summary_takes_the_median_of_runs_in_the_phases_order() -> None:
    first = hhs.derive({"schedule": 10.0, "execute_model": 100.0, "_model_forward": 60.0, "sample_tokens": 5.0,
                        "update_from_output": 1.0})  # fmt: skip
    second = hhs.derive({"schedule": 14.0, "execute_model": 110.0, "_model_forward": 70.0, "sample_tokens": 5.0,
                         "update_from_output": 1.0})  # fmt: skip
    rows = {r["phase"]: r for r in hhs.summarise("c", {1: [first, second]}, "0.32.0")}
    assert rows["schedule"]["us_median"] == 12.0 and rows["schedule"]["spread_pct"] == pytest.approx(33.3)
    assert "preprocess_mamba" not in rows  # a phase no run called is no row
    assert list(rows) == [p for p in hhs.ROW_ORDER if p in rows] and list(rows)[-1] == hhs.HOST_OUTSIDE_FORWARD
    assert rows[hhs.HOST_OUTSIDE_FORWARD]["us_median"] == (56.0 + 60.0) / 2


@pytest.mark.parametrize("argv", [["--tokens", "1"], ["--reps", "0"], ["--conc", "0"], ["--conditions", "7"]])
def test_bad_counts_and_conditions_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        hhs.main(argv)
    assert exit_info.value.code == 2


@pytest.mark.e2e
def test_a_real_cpu_engine_times_every_phase_of_both_mamba_modes(tmp_path: Path) -> None:
    # conditions 0 (prefix caching off: Mamba's `none` mode) and 1 (on: `align`); 4 tokens, 1 run
    argv = ["--tokens", "4", "--reps", "1", "--conc", "1", "--conditions", "0,1", "--out-dir", str(tmp_path),
            "--work-dir", str(tmp_path / "work")]  # fmt: skip
    assert hhs.main(argv) == 0
    rows = list(csv.DictReader((tmp_path / f"{hhs.STEM}.csv").open()))
    by = {(r["condition"], r["phase"]): float(r["us_median"]) for r in rows}
    off, on = (c.name for c in hhs.CONDITIONS[:2])
    for condition in (off, on):
        for phase in ("schedule", "_prepare_inputs", "_build_attention_metadata", "_model_forward", "sample_tokens"):
            assert by[(condition, phase)] > 0, (condition, phase)
        # the host's share holds the metadata build; execute_model's untimed rest is what its phases leave
        assert by[(condition, "_build_attention_metadata")] < by[(condition, hhs.HOST_OUTSIDE_FORWARD)]
        outside_forward = by[(condition, "execute_model")] - by[(condition, "_model_forward")]
        assert 0 < by[(condition, hhs.EXECUTE_REST)] < outside_forward
    # only the align mode (prefix caching on) copies Mamba states before the forward
    assert (on, "preprocess_mamba") in by and (off, "preprocess_mamba") not in by
    assert "| _build_attention_metadata |" in (tmp_path / f"{hhs.STEM}.md").read_text()
    assert (tmp_path / f"{hhs.STEM}.png").stat().st_size > 0
