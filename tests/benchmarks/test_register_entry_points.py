"""benchmarks/device/register_entry_points.py: a checkout run from PYTHONPATH (the H200 device) gets the metadata
through which vLLM finds the engine plugin, so the plan's MOE_SERVING_MOE_KERNEL=project is not a silent no-op."""

from __future__ import annotations

from pathlib import Path

from benchmarks.device.register_entry_points import write
from tests.bare_checkout import bare_checkout, entry_point_seen


def test_the_written_metadata_makes_the_plugin_visible_to_a_checkout_on_pythonpath(tmp_path: Path) -> None:
    checkout, site = bare_checkout(tmp_path), tmp_path / "site"
    assert entry_point_seen([site, checkout], tmp_path) == "False"
    info = write(site)
    assert (info / "entry_points.txt").read_text().startswith("[vllm.general_plugins]\n")
    assert entry_point_seen([site, checkout], tmp_path) == "True"
    # the lab's routing plugin rides along on the GPU host, and only there: the wheel's metadata never names it
    assert "moe_serving_lab_routing = benchmarks.e2e.routing_plugin:register" in (info / "entry_points.txt").read_text()
