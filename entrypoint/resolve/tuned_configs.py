"""The baked Triton MoE tile configs (kernels/configs/) as the resolver sees them: names, not contents.

vLLM looks a tuned file up by name (`VLLM_TUNED_CONFIG_FOLDER` first, then its shipped configs):
`E={E},N={N},device_name={name}[,dtype=fp8_w8a8][,block_shape=[bn,bk]].json`, E = local experts,
N = per-partition intermediate size (w2.shape[2]), name = torch.cuda.get_device_name() with spaces
as `_` (every H200 variant is `NVIDIA_H200`). A misnamed file is silently ignored by vLLM, so the
name logic lives once, in kernels/config_files.py, and tests/test_kernel_configs.py checks it against
vLLM's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kernels.config_files import CONFIG_DIR, config_file_name

# The image copies the configs to a fixed path (docker/install_project.sh) and names it here.
CONFIG_DIR_ENV = "MOE_SERVING_KERNEL_CONFIGS"


def default_config_dir(environ: Mapping[str, str]) -> Path:
    """The image's fixed copy when named, else the package's own kernels/configs."""
    return Path(environ[CONFIG_DIR_ENV]) if environ.get(CONFIG_DIR_ENV) else CONFIG_DIR


@dataclass(frozen=True)
class TunedConfigIndex:
    """The folder and the file names it holds (read once at start, passed to the pure resolver)."""

    folder: str
    names: frozenset[str]

    @classmethod
    def scan(cls, folder: Path = CONFIG_DIR) -> TunedConfigIndex | None:
        if not folder.is_dir():
            return None
        names = frozenset(p.name for p in folder.glob("E=*.json"))
        return cls(str(folder), names) if names else None


def tuned_file_name(
    num_experts: int, n: int, gpu_name: str, dtype: str | None, block_shape: tuple[int, int] | None
) -> str:
    """The file vLLM will look for on this GPU (kernels.config_files holds the naming rules)."""
    return config_file_name(num_experts, n, dtype, list(block_shape) if block_shape else None, device_name=gpu_name)
