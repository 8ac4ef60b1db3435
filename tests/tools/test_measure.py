"""tools/measure.py on a machine without a GPU: the row preamble (the timer and the bandwidth probe need the H200)."""

from __future__ import annotations

import re

import torch

from tools import measure


def test_versions_name_each_package_and_say_absent_for_the_missing():
    found = measure.versions(("torch", "no_such_package_here"))
    assert found == {"torch": torch.__version__, "no_such_package_here": measure.ABSENT}


def test_the_preamble_carries_gpu_versions_and_a_utc_timestamp():
    row = measure.run_preamble(("torch",))
    assert list(row) == ["gpu", "torch", "timestamp"]
    assert row["gpu"] == (torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", row["timestamp"])


def test_a_results_file_is_named_after_the_gpu_that_made_it():
    assert measure.file_tag("NVIDIA H200") == "h200"
    assert measure.file_tag("NVIDIA H200 NVL") == "h200"
    assert measure.file_tag("NVIDIA H100 80GB HBM3") == "h100"
    assert measure.file_tag("NVIDIA A100-SXM4-80GB") == "gpu"
