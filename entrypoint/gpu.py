"""GPU detection through NVML, and simulated GPUs for offline planning (`--gpu H200`, `sm_90`, `cpu`)."""

from __future__ import annotations

import re

from entrypoint.errors import ConfigError
from entrypoint.gpu_types import GpuDevice, GpuInventory

# name → (NVML name, compute capability, memory MiB). Memory as NVML reports it on these parts.
KNOWN_GPUS: dict[str, tuple[str, tuple[int, int], int]] = {
    "H200": ("NVIDIA H200", (9, 0), 143771),
    "H100": ("NVIDIA H100 80GB HBM3", (9, 0), 81559),
    "B200": ("NVIDIA B200", (10, 0), 183359),
    "A100": ("NVIDIA A100-SXM4-40GB", (8, 0), 40960),
    "L40S": ("NVIDIA L40S", (8, 9), 46068),
    "A10G": ("NVIDIA A10G", (8, 6), 23028),
    "L4": ("NVIDIA L4", (8, 9), 23034),
}
_SM_PATTERN = re.compile(r"^sm_?(\d+)(\d)$")


def simulate_gpus(spec: str, count: int | None = None) -> GpuInventory:
    """`H200`, `h100`, `sm_90`, `sm90` or `cpu` → an inventory of `count` identical devices (default 1)."""
    text = spec.strip()
    if text.lower() == "cpu":
        return GpuInventory(devices=(), source="simulated:cpu")
    if count is not None and count < 1:
        raise ConfigError("--num-gpus", count, "must be at least 1")
    n = count or 1
    known = {name.lower(): name for name in KNOWN_GPUS}
    if text.lower() in known:
        nvml_name, capability, memory = KNOWN_GPUS[known[text.lower()]]
        device = GpuDevice(name=nvml_name, compute_capability=capability, memory_mib=memory)
    elif match := _SM_PATTERN.match(text.lower()):
        capability = (int(match.group(1)), int(match.group(2)))
        device = GpuDevice(
            name=f"simulated sm_{match.group(1)}{match.group(2)}", compute_capability=capability, memory_mib=0
        )
    else:
        accepted = [*KNOWN_GPUS, "sm_XY (e.g. sm_90)", "cpu"]
        raise ConfigError("--gpu", spec, "unknown GPU", accepted)
    return GpuInventory(devices=(device,) * n, source=f"simulated:{spec}")


def detect_gpus() -> GpuInventory:
    """Every GPU NVML sees (respects CUDA_VISIBLE_DEVICES only as far as NVML does: it does not).

    NVML enumerates all devices of the host; the container runtime already limits what the
    container sees, which is what matters on SageMaker and with `docker run --gpus`.
    """
    try:
        import pynvml
    except ImportError:
        return GpuInventory(devices=(), source="none:nvidia-ml-py not installed")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return GpuInventory(devices=(), source=f"none:NVML unavailable ({exc})")
    try:
        devices = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else name
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024)
            devices.append(GpuDevice(name=name, compute_capability=(major, minor), memory_mib=memory))
        return GpuInventory(devices=tuple(devices), source="nvml")
    finally:
        pynvml.nvmlShutdown()


def gpu_inventory(spec: str | None, count: int | None) -> GpuInventory:
    """Simulated when `spec` is given, else detected; `count` alone trims/extends a detected set."""
    if spec:
        return simulate_gpus(spec, count)
    detected = detect_gpus()
    if count is None or detected.is_cpu:
        return detected
    if count < 1:
        raise ConfigError("--num-gpus", count, "must be at least 1")
    template = detected.devices[0]
    return GpuInventory(devices=(template,) * count, source=f"{detected.source} (count set to {count})")
