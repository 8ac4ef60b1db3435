"""scripts/join_offline_pieces.sh: the H200 host puts back the bundle parts that stage_offline_pieces.sh split for
transport (a call carries the tree and one folder, ≤ 64 MiB), byte for byte, and leaves whole parts alone."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from tests.conftest_paths import REPO


def test_split_parts_are_joined_byte_for_byte(tmp_path: Path) -> None:
    parts = {name: os.urandom(size) for name, size in (("bundle.part.00", 3000), ("bundle.part.01", 2500),
                                                          ("bundle.part.02", 700))}  # fmt: skip
    for name in ("bundle.part.00", "bundle.part.01"):  # as the staging splits them: a head and the rest
        subprocess.run(["split", "-b", "1000", "-d", "-a", "1", "-", str(tmp_path / f"{name}.s")],
                       input=parts[name], check=True)  # fmt: skip
    (tmp_path / "bundle.part.02").write_bytes(parts["bundle.part.02"])
    done = subprocess.run(["bash", str(REPO / "scripts/join_offline_pieces.sh"), str(tmp_path)],
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(parts)
    for name, data in parts.items():
        assert hashlib.sha256((tmp_path / name).read_bytes()).digest() == hashlib.sha256(data).digest(), name
    assert done.stdout.splitlines() == ["join_offline_pieces: bundle.part.00 (3000 bytes)",
                                        "join_offline_pieces: bundle.part.01 (2500 bytes)"]  # fmt: skip
    again = subprocess.run(["bash", str(REPO / "scripts/join_offline_pieces.sh"), str(tmp_path)],
                           capture_output=True, text=True, check=True)  # fmt: skip
    assert again.stdout == "" and (tmp_path / "bundle.part.00").read_bytes() == parts["bundle.part.00"]
