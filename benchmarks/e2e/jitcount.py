"""How many Triton kernels an engine compiled: new entries in the writable caches, by kernel name.

Triton writes one folder per compiled binary, with `<kernel>.json` metadata beside the binary (`__grp__*.json`
files only group them). A kernel read from the image's baked cache (kernels.triton_cache:BakedFirstCacheManager) writes
nothing, so a count taken before and after a phase is that phase's JIT compiles. vLLM moves TRITON_CACHE_DIR
under VLLM_CACHE_ROOT when torch.compile runs, so every cache folder of the job is scanned.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class KernelCount:
    by_name: Counter[str] = field(default_factory=Counter)
    paths: frozenset[str] = frozenset()

    def new_since(self, earlier: KernelCount) -> dict[str, int]:
        """Kernel name → binaries that are here and were not in `earlier`."""
        new = Counter(Path(p).stem for p in self.paths - earlier.paths)
        return dict(sorted(new.items()))


def compiled_kernels(roots: Iterable[Path]) -> KernelCount:
    paths = set()
    for root in roots:
        if root.is_dir():
            for meta in root.rglob("*.json"):
                if not meta.name.startswith("__grp__") and any(meta.parent.glob(f"{meta.stem}.*bin")):
                    paths.add(str(meta))
    return KernelCount(Counter(Path(p).stem for p in paths), frozenset(paths))
