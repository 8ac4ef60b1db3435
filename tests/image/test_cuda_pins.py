"""The cuda flavour's Python packages: the Dockerfile's pins (vLLM 0.26.0, torch 2.11.0, FlashInfer 0.6.14,
transformers 5.16.1) and the project's dependencies resolve for the image's Python (3.12, manylinux x86_64) under the
lock the build installs with (docker/cuda-constraints.txt, `make cuda-lock`), to exactly the lock — what
install_engine_cuda.sh and install_deps.sh would install, resolved by pip without downloading the 5 GB of CUDA wheels.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import cuda_lock


def test_the_cuda_image_installs_exactly_its_lock_for_python_3_12(tmp_path: Path) -> None:
    done, resolved = cuda_lock.resolve(cuda_lock.cuda_requirements(), tmp_path, constraints=cuda_lock.LOCK)
    assert done.returncode == 0, done.stderr[-4000:]
    lock = cuda_lock.read_lock()
    # a Dockerfile pin or a [project] dependency changed without `make cuda-lock`
    assert cuda_lock.differences(resolved, lock) == [], "run `make cuda-lock` and review what moved"
    args = cuda_lock.dockerfile_args()
    assert lock["vllm"] == args["VLLM_VERSION"] and lock["torch"] == args["TORCH_VERSION"]
    assert lock["flashinfer-python"] == args["FLASHINFER_VERSION"]
    assert lock["transformers"] == args["TRANSFORMERS_VERSION"]
    assert lock["triton"].startswith("3.6"), lock["triton"]
    print(f"cuda pins: {len(resolved)} packages resolve for cp312 to the lock (triton {lock['triton']})")


def test_what_the_lock_does_not_say_is_named() -> None:
    lock = {"vllm": "0.26.0", "numpy": "2.2.6", "gone": "1.0"}
    resolved = {"vllm": "0.26.0", "numpy": "2.3.0", "iniconfig": "2.1.0"}
    assert cuda_lock.differences(resolved, lock) == [
        "not in the lock: iniconfig==2.1.0", "in the lock, not installed: gone==1.0",
        "numpy: installs 2.3.0, the lock says 2.2.6",
    ]  # fmt: skip
    assert cuda_lock.normalise("Jinja2") == "jinja2" and cuda_lock.normalise("typing_extensions") == "typing-extensions"


def test_a_lock_that_contradicts_a_dockerfile_pin_fails_the_resolution(tmp_path: Path) -> None:
    """pip honours the lock: the transformers the Dockerfile no longer pins (5.24.0 breaks vLLM 0.26's Pixtral) in the
    lock against the Dockerfile's 5.16.1 is a conflict, not a silent pick."""
    stale = tmp_path / "stale-lock.txt"
    stale.write_text(cuda_lock.LOCK.read_text().replace("\ntransformers==", "\ntransformers==5.24.0\n# was "))
    done, _ = cuda_lock.resolve(cuda_lock.cuda_requirements(), tmp_path, constraints=stale)
    assert done.returncode != 0 and "transformers" in done.stdout + done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize("conflict", ["torch==2.10.0"])
def test_a_conflicting_pin_fails_the_check(tmp_path: Path, conflict: str) -> None:
    done, _ = cuda_lock.resolve([*cuda_lock.cuda_requirements(), conflict], tmp_path)
    assert done.returncode != 0 and "conflict" in (done.stdout + done.stderr).lower(), done.stderr[-2000:]
