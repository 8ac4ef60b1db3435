"""The baked Triton MoE tile configs (kernels/configs/) as the resolver sees them: names, not contents.

vLLM looks a tuned file up by name (`VLLM_TUNED_CONFIG_FOLDER` first, then its shipped configs):
`E={E},N={N},device_name={name}[,dtype=fp8_w8a8][,block_shape=[bn,bk]].json`, E = local experts,
N = per-partition intermediate size (w2.shape[2]), name = torch.cuda.get_device_name() with spaces
as `_` (every H200 variant is `NVIDIA_H200`). A misnamed file is silently ignored by vLLM, so the
name logic lives once, in kernels/config_files.py, and tests/test_kernel_configs.py checks it against
vLLM's own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from entrypoint.model.types import ModelDescription
from entrypoint.resolve.engine_args import EngineArgs
from entrypoint.resolve.gpu_types import GpuInventory
from kernels.config_files import CONFIG_DIR, PROVENANCE_FILE, config_file_name
from kernels.shapes import moe_partition

# The image copies the configs to a fixed path (docker/install_project.sh) and names it here.
CONFIG_DIR_ENV = "MOE_SERVING_KERNEL_CONFIGS"
TUNED_FOLDER_ENV = "VLLM_TUNED_CONFIG_FOLDER"  # vLLM's: the one folder it reads tuned files from
TUNED_TILES_DOC = "docs/results/tuned-tiles.md"  # what the baked tiles gain, and how they were tuned
LAYER_TILES_DOC = "docs/kernels.md"  # where tuned files come from, and which wins


def default_config_dir(environ: Mapping[str, str]) -> Path:
    """The image's fixed copy when named, else the package's own kernels/configs."""
    return Path(environ[CONFIG_DIR_ENV]) if environ.get(CONFIG_DIR_ENV) else CONFIG_DIR


# Where a folder of tuned files came from, in the order the resolver prefers them after the user's own folder.
ORIGIN_LAYER = "layer"  # tuned on this GPU by `make cache-layer` (entrypoint.resolve.layer_files)
ORIGIN_IMAGE = "image"  # shipped in the image (kernels/configs)


@dataclass(frozen=True)
class TunedConfigIndex:
    """The folder and the file names it holds (read once at start, passed to the pure resolver): where it came from,
    and when each file was tuned where its provenance.json says."""

    folder: str
    names: frozenset[str]
    origin: str = ORIGIN_IMAGE
    tuned_at: Mapping[str, str] = field(default_factory=dict, compare=False)

    @classmethod
    def scan(cls, folder: Path = CONFIG_DIR, origin: str = ORIGIN_IMAGE) -> TunedConfigIndex | None:
        if not folder.is_dir():
            return None
        names = frozenset(p.name for p in folder.glob("E=*.json"))
        return cls(str(folder), names, origin, _tuned_dates(folder / PROVENANCE_FILE.name)) if names else None


def _tuned_dates(path: Path) -> dict[str, str]:
    """File name → the date its provenance entry gives; {} when there is no readable provenance (the dates only
    decorate a reason line: a missing one is not an error)."""
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(entries, dict):
        return {}
    return {name: str(e["date"]) for name, e in entries.items() if isinstance(e, dict) and e.get("date")}


def tuned_file_name(
    num_experts: int, n: int, gpu_name: str, dtype: str | None, block_shape: tuple[int, int] | None
) -> str:
    """The file vLLM will look for on this GPU (kernels.config_files holds the naming rules)."""
    return config_file_name(num_experts, n, dtype, list(block_shape) if block_shape else None, device_name=gpu_name)


def tuned_config_env(
    model: ModelDescription,
    gpus: GpuInventory,
    engine: EngineArgs,
    tuned: Sequence[TunedConfigIndex],
    environ: Mapping[str, str],
) -> tuple[dict[str, str], list[str]]:
    """vLLM's tuned-config folder for this plan and the one reason line. Precedence: the user's own
    `VLLM_TUNED_CONFIG_FOLDER`, then the first folder of `tuned` (layer before image) holding this shape's file; with
    none holding it, no folder (vLLM then runs its shipped or default tiles, as it does without this project)."""
    if environ.get(TUNED_FOLDER_ENV):
        return {}, [f"tuned configs: {TUNED_FOLDER_ENV} already set by the user, left as is"]
    if not tuned:
        return {}, ["tuned configs: none baked in; vLLM uses its shipped or default tiles"]
    moe, device = model.moe, gpus.primary
    assert moe is not None and device is not None  # callers check is_moe and not is_cpu
    experts, n = moe_partition(
        moe.num_experts, moe.expert_intermediate_size, engine.tensor_parallel_size, engine.expert_parallel
    )
    dtype = "fp8_w8a8" if model.quantization.is_fp8 else None
    name = tuned_file_name(experts, n, device.name, dtype, model.quantization.block_shape)
    for index in tuned:
        if name not in index.names:
            continue
        if index.origin == ORIGIN_LAYER:
            when = index.tuned_at.get(name, "an unrecorded date")
            why = f"tuned configs: {name}: tuned on this GPU at {when} by `make cache-layer` ({LAYER_TILES_DOC})"
        else:
            why = f"tuned configs: {name}: baked file matches ({TUNED_TILES_DOC})"
        return {TUNED_FOLDER_ENV: index.folder}, [why]
    where = " or ".join(dict.fromkeys(index.origin for index in tuned))
    # 2026-12-06e: vLLM's H100 file for Phi-3.5-MoE starts at M = 256, so its decode ran a prefill tile 1.46x slower
    why = f"tuned configs: {name}: no file for this shape in the {where}; vLLM's tiles run (tune: {LAYER_TILES_DOC})"
    # The folder stays unset: it would change no MoE tile here, but vLLM also reads its LoRA and Mamba launch
    # configs from it, and with it set MoE-LoRA drops the tiles it derives from the MoE lookup for fixed defaults.
    return {}, [why]
