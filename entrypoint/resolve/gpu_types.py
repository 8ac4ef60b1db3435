"""What the resolver knows about the accelerators: detected through NVML or simulated by name."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class GpuDevice(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str  # as NVML / torch.cuda.get_device_name() reports it, e.g. "NVIDIA H200"
    compute_capability: tuple[int, int]  # (9, 0) for Hopper
    memory_mib: int


class GpuInventory(BaseModel):
    """All visible accelerators. An empty `devices` tuple means the CPU engine."""

    model_config = ConfigDict(frozen=True)

    devices: tuple[GpuDevice, ...] = ()
    source: str = "none"  # "nvml", "simulated:<spec>", "none"

    @property
    def is_cpu(self) -> bool:
        return not self.devices

    @property
    def count(self) -> int:
        return len(self.devices)

    @property
    def primary(self) -> GpuDevice | None:
        return self.devices[0] if self.devices else None

    @property
    def sm(self) -> int | None:
        """Compute capability as vLLM writes it (90 for 9.0), from the first device."""
        if not self.devices:
            return None
        major, minor = self.devices[0].compute_capability
        return major * 10 + minor

    def summary(self) -> GpuSummary:
        primary = self.primary
        return GpuSummary(
            kind="cpu" if self.is_cpu else "cuda",
            count=self.count,
            name=primary.name if primary else "cpu",
            compute_capability=(
                f"{primary.compute_capability[0]}.{primary.compute_capability[1]}" if primary else None
            ),
            sm=self.sm,
            memory_mib=primary.memory_mib if primary else None,
            source=self.source,
        )


class GpuSummary(BaseModel):
    """The accelerators as a plan reports them (`gpu` in `resolve --json`): the first device, and how many."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["cpu", "cuda"] = "cpu"
    count: int = 0
    name: str = "cpu"
    compute_capability: str | None = None  # "9.0"
    sm: int | None = None  # 90
    memory_mib: int | None = None
    source: str = "none"

    def line(self) -> str:
        """'8 x NVIDIA H200 (sm 90)'."""
        return f"{self.count} x {self.name} (sm {self.sm})"
