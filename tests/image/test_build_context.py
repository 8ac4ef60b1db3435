"""The real build context: what `docker build .` sends, as Docker itself filters it through .dockerignore.

A throwaway Dockerfile (`FROM scratch`, `COPY . /`) exports the context the daemon received; it must be exactly
the allowlisted files of the checkout (tests/docker/build_context.py), plus staged wheels, and nothing else.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest_paths import REPO
from tests.docker.build_context import context_files
from tests.docker.test_dockerfile import copy_sources
from tests.image.container import DOCKER


def real_context(dest: Path) -> set[str]:
    dockerfile = dest.parent / "Dockerfile.context"
    dockerfile.write_text("FROM scratch\nCOPY . /\n")
    done = subprocess.run(
        [DOCKER, "build", "-q", "-f", str(dockerfile), "-o", f"type=local,dest={dest}", str(REPO)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "DOCKER_BUILDKIT": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return {str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()}


def test_the_build_context_is_exactly_the_allowlisted_files(tmp_path: Path) -> None:
    context = real_context(tmp_path / "context")
    expected = context_files()
    assert context - expected == set(), f"in the context but not allowlisted: {sorted(context - expected)[:20]}"
    assert expected - context == set(), f"allowlisted but kept out: {sorted(expected - context)[:20]}"
    for never in (".git/HEAD", ".venv/bin/python", "tests/conftest.py", "Makefile", "benchmarks/__init__.py"):
        assert never not in context


def test_every_copy_source_of_the_dockerfile_is_in_the_context(tmp_path: Path) -> None:
    context = real_context(tmp_path / "context")
    for source in copy_sources():
        found = source in context or any(p.startswith(source.rstrip("/") + "/") for p in context)
        assert found, f"COPY {source}: not in the build context"
