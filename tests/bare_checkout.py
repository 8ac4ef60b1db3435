"""A Python that sees this project's code only through PYTHONPATH, without its package metadata: the H200 device's
case (its copy of the checkout has no git-ignored moe_serving.egg-info, which a local `pip install -e .` leaves at
the root), where vLLM finds no entry point for the engine plugin."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest_paths import REPO

PROBE = "from entrypoint.moe_plugin import entry_point_installed; print(entry_point_installed())"


def bare_checkout(tmp_path: Path) -> Path:
    """The packages the entry-point check imports, linked into a folder without any metadata."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for package in ("entrypoint", "kernels"):
        (checkout / package).symlink_to(REPO / package)
    return checkout


def entry_point_seen(path: list[Path], cwd: Path) -> str:
    """entry_point_installed() in a Python without site-packages (-S) that sees only `path`, run in `cwd`."""
    env = {"PYTHONPATH": ":".join(map(str, path)), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-S", "-c", PROBE], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
