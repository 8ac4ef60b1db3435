"""`serve` in the CUDA image refuses to start without a GPU, in one line, before reading a model or importing vLLM."""

from __future__ import annotations

import pytest

from entrypoint.resolve.gpu import detect_gpus, simulate_gpus
from entrypoint.serve import FLAVOUR_ENV, require_a_gpu_in_the_cuda_image
from entrypoint.utils.errors import ConfigError


def test_the_cuda_image_without_a_gpu_names_docker_run_gpus_all() -> None:
    no_gpu = detect_gpus()  # this machine has no NVIDIA driver: NVML does not load
    assert no_gpu.is_cpu
    with pytest.raises(ConfigError) as refused:
        require_a_gpu_in_the_cuda_image({FLAVOUR_ENV: "cuda"}, no_gpu)
    message = str(refused.value)
    assert "--gpus all" in message and "\n" not in message
    assert "NVML" in message  # why no GPU was seen, as NVML said it


@pytest.mark.parametrize(
    ("flavour", "gpu"),
    [
        ("cuda", "H200"),  # the CUDA image with its GPU
        ("cpu", "cpu"),  # the cpu image never needs one
        (None, "cpu"),  # outside any image (make run, the tests): no flavour, no refusal
    ],
)
def test_no_refusal_where_a_gpu_is_not_needed_or_present(flavour: str | None, gpu: str) -> None:
    environ = {FLAVOUR_ENV: flavour} if flavour else {}
    require_a_gpu_in_the_cuda_image(environ, simulate_gpus(gpu))
