"""benchmarks/device/register_entry_points.py: a checkout run from PYTHONPATH (the H200 device) gets the metadata
through which vLLM finds the engine plugin, so the plan's MOE_SERVING_MOE_KERNEL=project is not a silent no-op."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks.device.register_entry_points import write
from tests.conftest_paths import REPO

PROBE = "from entrypoint.moe_plugin import entry_point_installed; print(entry_point_installed())"


def _bare_python(path: list[Path], cwd: Path) -> str:
    """entry_point_installed() in a Python without site-packages that sees only `path` (the device's setup)."""
    env = {"PYTHONPATH": ":".join(map(str, path)), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-S", "-c", PROBE], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_written_metadata_makes_the_plugin_visible_to_a_checkout_on_pythonpath(tmp_path: Path) -> None:
    checkout, site = tmp_path / "checkout", tmp_path / "site"
    checkout.mkdir()
    for package in ("entrypoint", "kernels"):  # no moe_serving.egg-info: git ignores it, the device copy lacks it
        (checkout / package).symlink_to(REPO / package)
    assert _bare_python([site, checkout], tmp_path) == "False"
    info = write(site)
    assert (info / "entry_points.txt").read_text().startswith("[vllm.general_plugins]\n")
    assert _bare_python([site, checkout], tmp_path) == "True"
