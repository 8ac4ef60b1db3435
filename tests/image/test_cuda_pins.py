"""The cuda flavour's Python packages: the Dockerfile's pins (vLLM 0.32.0, torch 2.13.0, FlashInfer 0.7.0.post1,
transformers 5.19.0, cuda-toolkit 13.0.3's nvcc) and the project's dependencies resolve for the image's Python (3.11,
manylinux x86_64) under the
lock the build installs with (docker/cuda-constraints.txt, `make cuda-lock`), to exactly the lock — what
install_engine_cuda.sh and install_deps.sh would install, resolved by pip without downloading the 5 GB of CUDA wheels.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import cuda_lock


def test_the_cuda_image_installs_exactly_its_lock_for_its_python(tmp_path: Path) -> None:
    done, resolved = cuda_lock.resolve(cuda_lock.cuda_requirements(), tmp_path, constraints=cuda_lock.LOCK)
    assert done.returncode == 0, done.stderr[-4000:]
    lock = cuda_lock.read_lock()
    # a Dockerfile pin or a [project] dependency changed without `make cuda-lock`
    assert cuda_lock.differences(resolved, lock) == [], "run `make cuda-lock` and review what moved"
    args = cuda_lock.dockerfile_args()
    assert lock["vllm"] == args["VLLM_VERSION"] and lock["torch"] == args["TORCH_VERSION"]
    assert lock["flashinfer-python"] == args["FLASHINFER_VERSION"]
    assert lock["transformers"] == args["TRANSFORMERS_VERSION"]
    # torch 2.13.0's CUDA build pins triton 3.7.1; nvcc comes from the toolkit release torch pins, not a newer one
    assert lock["triton"] == "3.7.1", lock["triton"]
    assert lock["nvidia-cuda-nvcc"].startswith("13.0."), lock["nvidia-cuda-nvcc"]
    assert lock["cuda-toolkit"].startswith(args["CUDA_TOOLKIT_VERSION"]), lock["cuda-toolkit"]
    print(f"cuda pins: {len(resolved)} packages resolve for cp{cuda_lock.IMAGE_PYTHON} to the lock")


def test_what_the_lock_does_not_say_is_named() -> None:
    lock = {"vllm": "0.26.0", "numpy": "2.2.6", "gone": "1.0"}
    resolved = {"vllm": "0.26.0", "numpy": "2.3.0", "iniconfig": "2.1.0"}
    assert cuda_lock.differences(resolved, lock) == [
        "not in the lock: iniconfig==2.1.0", "in the lock, not installed: gone==1.0",
        "numpy: installs 2.3.0, the lock says 2.2.6",
    ]  # fmt: skip
    assert cuda_lock.normalise("Jinja2") == "jinja2" and cuda_lock.normalise("typing_extensions") == "typing-extensions"


def test_a_lock_that_contradicts_a_dockerfile_pin_fails_the_resolution(tmp_path: Path) -> None:
    """pip honours the lock: another transformers in the lock than the Dockerfile's pin is a conflict, not a silent
    pick."""
    stale = tmp_path / "stale-lock.txt"
    stale.write_text(cuda_lock.LOCK.read_text().replace("\ntransformers==", "\ntransformers==5.18.0\n# was "))
    done, _ = cuda_lock.resolve(cuda_lock.cuda_requirements(), tmp_path, constraints=stale)
    assert done.returncode != 0 and "transformers" in done.stdout + done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize("conflict", ["torch==2.11.0"])
def test_a_conflicting_pin_fails_the_check(tmp_path: Path, conflict: str) -> None:
    done, _ = cuda_lock.resolve([*cuda_lock.cuda_requirements(), conflict], tmp_path)
    assert done.returncode != 0 and "conflict" in (done.stdout + done.stderr).lower(), done.stderr[-2000:]
