"""The cuda image's lock: every Python package its build installs, at one version (docker/cuda-constraints.txt).

The Dockerfile pins vLLM, torch, FlashInfer and transformers; the ~200 packages under them were whatever pip picked
on build day. transformers showed what that costs: vLLM 0.26.0 asks for `>=5.5.3`, 5.17 removed a class vLLM's
Pixtral / Llava / Mistral3 modules import, and an image built after that day could not load those models
(docs/image.md). The build now installs under this file as pip constraints (docker/install_engine_cuda.sh,
docker/install_deps.sh), so two builds of one commit get the same packages, and a version moves only when this file
is written again and reviewed:

    python -m tools.cuda_lock            # resolve the pins for the image's Python and write the lock (`make cuda-lock`)

pip resolves for CPython 3.11 (Debian 12's) on manylinux x86_64 (the image's) from package metadata, without
downloading the 5 GB of CUDA wheels. tests/image/test_cuda_pins.py resolves again under the lock and fails when the
two differ: a Dockerfile pin or a [project] dependency changed without the lock being written again.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "docker" / "cuda-constraints.txt"
# pip matches a wheel's platform tag exactly, so every manylinux tag a current x86_64 host accepts is listed; with
# fewer, pip fails on wheels such as nvidia-nccl-cu13 and that failure says nothing about the pins.
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in range(5, 41)] + [
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64",
]  # fmt: skip
# What install_deps.sh installs besides the engine and the project's dependencies (install_project.sh builds the
# project without build isolation).
BUILD_TOOLS = ("setuptools>=69,<81", "wheel>=0.43")
IMAGE_PYTHON = "3.11"  # Debian 12's python3, the base of both flavours (docker/install_system.sh)
_ARG = re.compile(r"^ARG\s+([A-Z_]+)=(\S+)\s*$")


def dockerfile_args(dockerfile: Path = REPO / "Dockerfile") -> dict[str, str]:
    return {m[1]: m[2] for line in dockerfile.read_text().splitlines() if (m := _ARG.match(line))}


def cuda_requirements() -> list[str]:
    """What the cuda flavour's deps stage asks pip for: the engine at the Dockerfile's pins, then ours."""
    args = dockerfile_args()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return [
        f"vllm=={args['VLLM_VERSION']}",
        f"torch=={args['TORCH_VERSION']}",
        f"flashinfer-python=={args['FLASHINFER_VERSION']}",
        f"transformers=={args['TRANSFORMERS_VERSION']}",
        f"cuda-toolkit[nvcc,cccl]=={args['CUDA_TOOLKIT_VERSION']}",
        *BUILD_TOOLS,
        *project,
    ]


def resolve(
    requirements: Sequence[str], work: Path, constraints: Path | None = None
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """pip's resolution for the image's Python: (pip's process, {normalised name: version}); {} when it failed."""
    report = work / "report.json"
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    limit = ["--constraint", str(constraints)] if constraints else []
    # --isolated: a development machine's pip configuration adds a folder holding torch 2.13.0+cpu, whose local label
    # sorts above the registry's CUDA build; the image's pip has no such configuration.
    argv = [sys.executable, "-m", "pip", "--isolated", "install", "--dry-run", "--quiet", "--report", str(report),
            "--ignore-installed", "--only-binary=:all:", "--python-version", IMAGE_PYTHON, "--implementation", "cp",
            "--target", str(work / "t"), *platforms, *limit, *requirements]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    resolved = {}
    if done.returncode == 0:
        installs = json.loads(report.read_text())["install"]
        resolved = {normalise(i["metadata"]["name"]): i["metadata"]["version"] for i in installs}
    return done, resolved


def normalise(name: str) -> str:
    """PEP 503's form of a distribution name (pip's report keeps each wheel's own spelling)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def render(resolved: dict[str, str]) -> str:
    head = [
        "# The cuda image's Python packages, one version each: pip constraints for its deps stage.",
        "# Written by `python -m tools.cuda_lock` (make cuda-lock); checked by tests/image/test_cuda_pins.py.",
        "# Edit the Dockerfile's pins or pyproject.toml, then write this file again; never by hand.",
    ]
    return "\n".join([*head, *(f"{name}=={resolved[name]}" for name in sorted(resolved))]) + "\n"


def read_lock(path: Path = LOCK) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[normalise(name)] = version
    return pins


def differences(resolved: dict[str, str], lock: dict[str, str]) -> list[str]:
    """What a resolution under the lock installs that the lock does not say: a package it lacks (a new dependency
    nobody reviewed), one it has that is no longer installed, or another version."""
    out = [f"not in the lock: {n}=={v}" for n, v in sorted(resolved.items()) if n not in lock]
    out += [f"in the lock, not installed: {n}=={lock[n]}" for n in sorted(set(lock) - set(resolved))]
    out += [f"{n}: installs {v}, the lock says {lock[n]}" for n, v in sorted(resolved.items()) if lock.get(n, v) != v]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.cuda_lock", description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=LOCK, help=f"where the lock goes (default {LOCK.relative_to(REPO)})")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        done, resolved = resolve(cuda_requirements(), Path(work))
    if done.returncode != 0:
        print(f"cuda_lock: pip could not resolve the cuda image's pins:\n{done.stderr[-4000:]}", file=sys.stderr)
        return 1
    old = read_lock(args.out) if args.out.is_file() else {}
    args.out.write_text(render(resolved))
    moved = sorted(f"{n} {old.get(n, '(new)')} -> {resolved[n]}" for n in resolved if old.get(n) != resolved[n])
    gone = sorted(set(old) - set(resolved))
    changes = f"{len(moved)} changed" if not old else f"changed: {', '.join(moved) or 'none'}"
    print(f"cuda_lock: {len(resolved)} packages -> {args.out}; {changes}"
          + (f"; dropped: {', '.join(gone)}" if gone else ""))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
