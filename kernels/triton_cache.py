"""The Triton cache manager every server process of the image loads: the baked kernels first.

The image sets ``TRITON_CACHE_MANAGER=kernels.triton_cache:BakedFirstCacheManager`` and
``MOE_BAKED_TRITON_CACHE=/opt/moe-serving/triton-cache`` (the cache ``python -m kernels.aot bake`` compiled at
build time, read-only at run time). A plain ``TRITON_CACHE_DIR`` pointing at the baked cache is not enough: vLLM,
when torch.compile is on, points ``TRITON_CACHE_DIR`` at its own compile-cache folder before the MoE kernels are
first launched (vllm/compilation/compiler_interface.py, ``initialize_cache``), so the baked cache would never be
read. New compiles still go to the current ``TRITON_CACHE_DIR`` (under /tmp in the image).

Kept apart from kernels/aot.py (the bake) because every engine process imports this module: it must stay small
and import nothing but Triton's own cache.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

BAKED_ENV = "MOE_BAKED_TRITON_CACHE"


def _file_cache_manager() -> type:
    from triton.runtime.cache import FileCacheManager

    return FileCacheManager


# Without Triton (a machine with no engine, e.g. the deployment tool's) the module still imports; the class is
# only instantiated by Triton itself.
class BakedFirstCacheManager(_file_cache_manager() if importlib.util.find_spec("triton") else object):  # type: ignore[misc]
    """Triton cache manager: look in the baked, read-only cache first, then the writable one."""

    def __init__(self, key: str, override: bool = False, dump: bool = False) -> None:
        super().__init__(key, override=override, dump=dump)
        root = os.environ.get(BAKED_ENV)
        self.baked_dir = os.path.join(root, key) if root and not (override or dump) else None

    def get_file(self, filename: str) -> str | None:
        if self.baked_dir:
            path = os.path.join(self.baked_dir, filename)
            if os.path.exists(path):
                return path
        return super().get_file(filename)

    def get_group(self, filename: str) -> dict[str, str] | None:
        if self.baked_dir:
            grp = os.path.join(self.baked_dir, f"__grp__{filename}")
            if os.path.exists(grp):
                with open(grp) as f:
                    children = json.load(f).get("child_paths") or {}
                if children and all(os.path.exists(p) for p in children.values()):
                    return dict(children)
        return super().get_group(filename)


# The value of TRITON_CACHE_MANAGER that selects this manager (Triton imports ``module:Class``); the Dockerfile's ENV
# spells it out and tests/docker/test_dockerfile.py checks the two agree.
TRITON_CACHE_MANAGER = f"{__name__}:{BakedFirstCacheManager.__name__}"


def cache_entries(cache_dir: Path) -> set[str]:
    """Compiled kernels in a Triton cache: one directory per cache key holding a ``*.json`` metadata file."""
    if not cache_dir.is_dir():
        return set()
    return {d.name for d in cache_dir.iterdir() if d.is_dir() and any(d.glob("fused_moe_kernel.json"))}
