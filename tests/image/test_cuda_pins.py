"""The cuda flavour's Python pins resolve: vLLM, torch and FlashInfer at the Dockerfile's build arguments, with the
project's own dependencies, for the image's Python (3.12, manylinux x86_64) — what install_engine_cuda.sh and
install_deps.sh would install, resolved by pip without downloading the 5 GB of CUDA wheels.

pip must match a wheel's platform tag exactly, so every manylinux tag a current x86_64 host accepts is listed;
with fewer, pip fails on wheels such as nvidia-nccl-cu13 and that failure says nothing about the pins.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest_paths import REPO
from tests.docker.test_dockerfile import INSTRUCTIONS

PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in range(5, 41)] + [
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64",
]  # fmt: skip


def dockerfile_args() -> dict[str, str]:
    return dict(rest.split("=", 1) for word, rest in INSTRUCTIONS if word == "ARG" and "=" in rest)


def cuda_requirements() -> list[str]:
    args = dockerfile_args()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return [
        f"vllm=={args['VLLM_VERSION']}",
        f"torch=={args['TORCH_VERSION']}",
        f"flashinfer-python=={args['FLASHINFER_VERSION']}",
        f"transformers=={args['TRANSFORMERS_VERSION']}",
        "setuptools>=69,<81",
        "wheel>=0.43",
        *project,
    ]


def resolve(requirements: list[str], target: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    report = target / "report.json"
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", str(report),
            "--ignore-installed", "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
            "--target", str(target / "t"), *platforms, *requirements]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    resolved = {}
    if done.returncode == 0:
        installs = json.loads(report.read_text())["install"]
        resolved = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in installs}
    return done, resolved


def test_the_cuda_image_pins_resolve_for_python_3_12(tmp_path: Path) -> None:
    done, resolved = resolve(cuda_requirements(), tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    args = dockerfile_args()
    assert resolved["vllm"] == args["VLLM_VERSION"]
    assert resolved["torch"] == args["TORCH_VERSION"]
    assert resolved["flashinfer-python"] == args["FLASHINFER_VERSION"]
    assert resolved["transformers"] == args["TRANSFORMERS_VERSION"]
    assert resolved["triton"].startswith("3.6"), resolved["triton"]
    print(f"cuda pins: {len(resolved)} packages resolve for cp312 (triton {resolved['triton']})")


@pytest.mark.parametrize("conflict", ["torch==2.10.0"])
def test_a_conflicting_pin_fails_the_check(tmp_path: Path, conflict: str) -> None:
    done, _ = resolve([*cuda_requirements(), conflict], tmp_path)
    assert done.returncode != 0 and "conflict" in (done.stdout + done.stderr).lower(), done.stderr[-2000:]
