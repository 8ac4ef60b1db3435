"""benchmarks.e2e.plugin_logits: its comparison, and one run on the CPU engine, where the plan turns no plugin on, so
the two rows are one engine and the report must say so with zero differences."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.e2e.plugin_logits import compare
from tests.conftest_paths import REPO


def logprobs(tokens: list[str], tops: list[dict[str, float]]) -> dict:
    return {"tokens": tokens, "top_logprobs": tops}


def test_compare_counts_the_shared_prefix_and_the_largest_logprob_gap_of_shared_tokens() -> None:
    a = logprobs(["x", "y", "z"], [{"x": -0.1, "q": -2.0}, {"y": -0.2, "w": -1.0}, {"z": -0.3}])
    b = logprobs(["x", "y", "k"], [{"x": -0.15, "q": -2.5}, {"y": -0.2}, {"k": -0.1, "z": -0.4}])
    got = compare(a, b, steps=2)
    assert got == {"agree_tokens": 2, "tokens": 3, "max_abs_dlogprob_first_steps": 0.5, "top1_equal_first_steps": True,
                   "finite": True, "decode_steps_compared": 1, "max_abs_dlogprob_decode": 0.0}  # fmt: skip
    # step 0 (the prefill's) differs by 0.5, step 1 (a decode step) by 0; step 2 follows different contexts
    assert compare(a, b, steps=3)["top1_equal_first_steps"] is False  # step 3: z against k
    assert compare(a, a, steps=3) == {"agree_tokens": 3, "tokens": 3, "max_abs_dlogprob_first_steps": 0.0,
                                      "top1_equal_first_steps": True, "finite": True, "decode_steps_compared": 2,
                                      "max_abs_dlogprob_decode": 0.0}  # fmt: skip
    parted = logprobs(["k", "y", "z"], [{"x": -0.2}, {"y": -5.0}, {"z": -0.3}])
    assert compare(a, parted, steps=3)["decode_steps_compared"] == 0  # parted at once: no decode step to compare
    broken = logprobs(["x", "y", "z"], [{"x": float("nan")}, {"y": -0.2}, {"z": -0.3}])
    assert compare(a, broken, steps=1)["finite"] is False  # a NaN would hide from the max |Δ|


@pytest.mark.e2e
def test_on_the_cpu_engine_the_two_rows_are_one_engine_and_nothing_differs(tmp_path: Path) -> None:
    from entrypoint.model.tiny_model import ensure_tiny_model
    from entrypoint.run_local import CPU_ENV_DEFAULTS, tiny_model_dir

    model = ensure_tiny_model(tiny_model_dir(dict(os.environ)))
    argv = [sys.executable, "-m", "benchmarks.e2e.plugin_logits", "--model", str(model), "--out-dir", str(tmp_path),
            "--prompts", "2", "--input-len", "8", "--tokens", "8", "--steps", "4", "--top", "5",
            "--start-timeout-s", "300"]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, env={**os.environ, **CPU_ENV_DEFAULTS}, capture_output=True, text=True,
                          timeout=400)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "plan: the same engine as plan_vllm_kernel" in done.stdout
    rows = list(csv.DictReader((tmp_path / "plugin_logits.csv").open()))
    assert sorted((r["pair"], r["prompt"]) for r in rows) == [("control", "0"), ("control", "1"), ("plugin", "0"),
                                                               ("plugin", "1")]  # fmt: skip
    assert "plan_vllm_kernel_repeat: the same engine started again" in done.stdout
    for row in rows:  # the CPU engine is deterministic: the control's second engine agrees exactly too
        assert row["plugin_on"] == "False" and row["agree_tokens"] == row["tokens"] == "8"
        assert float(row["max_abs_dlogprob_first_steps"]) == 0.0 and row["top1_equal_first_steps"] == "True"
        assert row["finite"] == "True"
    assert "auto weights" in done.stdout  # the tiny model's own weights, not dummy ones
