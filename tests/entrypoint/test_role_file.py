"""`serve` records the node role where docker/healthcheck.sh reads it (a headless worker has no /ping)."""

from __future__ import annotations

from pathlib import Path

from entrypoint.resolve.plan import Plan
from entrypoint.serve import ROLE_FILE_ENV, write_role_file


def test_the_role_is_written_over_the_last_start(tmp_path: Path) -> None:
    path = tmp_path / "moe-serving" / "node-role"
    path.parent.mkdir()
    path.write_text("worker\n")  # left by an earlier start of the same container (docker restart keeps /tmp)
    line = write_role_file(Plan(model="m", vllm_args=("m",), node_role="head"), {ROLE_FILE_ENV: str(path)})
    assert path.read_text() == "head\n"
    assert line.startswith(f"node role: head, recorded in {path}")


def test_an_unwritable_place_is_said_not_raised(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    line = write_role_file(Plan(model="m", vllm_args=("m",)), {ROLE_FILE_ENV: str(blocker / "node-role")})
    assert line.startswith("node role: single, not recorded for the health check")
