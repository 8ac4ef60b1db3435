"""What the image's build context must hold, stated on its own (not read back from .dockerignore, which is what
tests/image/test_build_context.py checks against the real `docker build`)."""

from __future__ import annotations

import subprocess

from tests.conftest_paths import REPO

ALLOWED = (
    "pyproject.toml", "README.md", "serving.properties", "docker/", "entrypoint/", "kernels/", "ops/",
    "sagemaker_deploy/",
)  # fmt: skip


def allowed(path: str) -> bool:
    # Inside the allowed folders only bytecode is kept out (benchmark evidence lives under benchmarks/results/).
    if "__pycache__/" in path or path.endswith(".pyc"):
        return False
    return any(path == a or (a.endswith("/") and path.startswith(a)) for a in ALLOWED)


def checkout_files() -> set[str]:
    """The checkout's files (tracked, or untracked and not ignored by git) plus wheels staged for the build."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "--cached", "--others", "--exclude-standard"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    staged = [str(p.relative_to(REPO)) for p in (REPO / "docker" / "wheels").glob("*.whl")]
    return {p for p in [*listed, *staged] if (REPO / p).is_file()}


def context_files() -> set[str]:
    """The files the build context should hold."""
    return {p for p in checkout_files() if allowed(p)}
