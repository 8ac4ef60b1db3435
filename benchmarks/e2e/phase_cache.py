"""A Triton cache the engines of one run share, read the way the image reads its baked cache.

A Nemotron-3-Nano engine spends ~84 s of its ~225 s cold start JIT-compiling Triton kernels in the profile run
(2026-12-01c: 139 kernels, most of them Mamba's, the same for every MoE backend), and each engine of a phase started
from empty caches paid it again: four engines of a phase cost a whole device call. With ``--share-triton-cache``
the first engine of a run starts from empty caches as before, and each later one reads every kernel the earlier
engines compiled through ``kernels.triton_cache:BakedFirstCacheManager`` (what the image sets), so it compiles only
what is new for its backend. Triton keys a binary by its source, constants, target and Triton build, so a kernel
read from here is the one the engine would have compiled: decode throughput is not affected; start times are (each
row's ``start_caches`` column says which kind of start it was). vLLM's torch.compile cache is not shared: every
engine still compiles its own graph.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from kernels.triton_cache import BAKED_ENV, TRITON_CACHE_MANAGER

EMPTY = "empty"


class PhaseTritonCache:
    """Kernels compiled by the run's earlier engines, one folder per Triton cache key under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        shutil.rmtree(root, ignore_errors=True)  # this run's engines only
        root.mkdir(parents=True)

    def kernels(self) -> int:
        return sum(1 for _ in _kernel_dirs(self.root))

    def describe(self) -> str:
        """The `start_caches` label of the next engine's row."""
        n = self.kernels()
        return f"empty + {n} Triton kernels of the run's earlier engines" if n else EMPTY

    def env(self) -> dict[str, str]:
        """What an engine's environment needs to read these kernels before compiling its own."""
        return {"TRITON_CACHE_MANAGER": TRITON_CACHE_MANAGER, BAKED_ENV: str(self.root)}

    def absorb(self, engine_cache: Path) -> int:
        """Copy the Triton binaries an engine compiled (anywhere under its cache folder: vLLM moves the Triton cache
        under its torch.compile folder, per rank) into the shared folder; returns how many were new."""
        added = 0
        for key_dir in _kernel_dirs(engine_cache):
            target = self.root / key_dir.name
            if target.exists():
                continue
            # a group file (`__grp__*.json`) lists its children by absolute path, in the engine's own cache,
            # which stays until that engine's backend runs again; BakedFirstCacheManager checks they exist
            shutil.copytree(key_dir, target, symlinks=True)
            added += 1
        return added


def _kernel_dirs(root: Path):
    """Triton cache-key folders: a folder holding a kernel's `<name>.json` beside its binary."""
    if not root.is_dir():
        return
    seen: set[Path] = set()
    for meta in root.rglob("*.json"):
        folder = meta.parent
        if folder in seen or meta.name.startswith("__grp__"):
            continue
        if any(folder.glob(f"{meta.stem}.*bin")):
            seen.add(folder)
            yield folder
