"""GPU detection through NVML, and simulated GPUs for offline planning (`--gpu H200`, `sm_90`, `cpu`)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from entrypoint.resolve.gpu_types import GpuDevice, GpuInventory
from entrypoint.utils.errors import ConfigError

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


def visible_indices(value: str | None, uuids: Sequence[str]) -> list[int]:
    """NVML indices that CUDA will expose under CUDA_VISIBLE_DEVICES=`value` (None: unset → all).

    CUDA's rules: a comma list of indices or UUIDs (`GPU-…`, a unique prefix is enough); parsing stops at the first
    entry that matches no device (so `-1` or `""` hides every GPU); a device listed twice makes CUDA refuse all.
    """
    if value is None:
        return list(range(len(uuids)))
    chosen: list[int] = []
    for entry in (e.strip() for e in value.split(",")):
        if entry.isascii() and entry.isdigit() and int(entry) < len(uuids):
            index = int(entry)
        else:
            matches = [i for i, u in enumerate(uuids) if entry and u.startswith(entry)]
            if len(matches) != 1:
                break
            index = matches[0]
        if index in chosen:
            return []
        chosen.append(index)
    return chosen


def detect_gpus(environ: dict[str, str] | None = None) -> GpuInventory:
    """The GPUs this process's CUDA will see: NVML enumerates the whole host (or what the container runtime
    passed in, as on SageMaker and with `docker run --gpus`), narrowed by CUDA_VISIBLE_DEVICES as CUDA does."""
    env = os.environ if environ is None else environ
    try:
        import pynvml
    except ImportError:
        return GpuInventory(devices=(), source="none:nvidia-ml-py not installed")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return GpuInventory(devices=(), source=f"none:NVML unavailable ({exc})")
    try:
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        uuids = [_text(pynvml.nvmlDeviceGetUUID(h)) for h in handles]
        visible = visible_indices(env.get("CUDA_VISIBLE_DEVICES"), uuids)
        devices = []
        for index in visible:
            handle = handles[index]
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024)
            name = _text(pynvml.nvmlDeviceGetName(handle))
            devices.append(GpuDevice(name=name, compute_capability=(major, minor), memory_mib=memory))
        source = "nvml"
        if "CUDA_VISIBLE_DEVICES" in env:
            source += f" (CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']!r}: {len(visible)} of {len(handles)})"
        return GpuInventory(devices=tuple(devices), source=source)
    finally:
        pynvml.nvmlShutdown()


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def gpu_inventory(spec: str | None, count: int | None) -> GpuInventory:
    """Simulated when `spec` is given, else detected; `count` alone trims/extends a detected set."""
    if spec:
        return simulate_gpus(spec, count)
    detected = detect_gpus()
    if count is None:
        return detected
    if count < 1:
        raise ConfigError("--num-gpus", count, "must be at least 1")
    if detected.is_cpu:  # a count of nothing: planning for GPUs here needs the GPU named
        raise ConfigError("--num-gpus", count, "no GPU detected here to count", "--gpu H200 (or another GPU) with it")
    template = detected.devices[0]
    return GpuInventory(devices=(template,) * count, source=f"{detected.source} (count set to {count})")
