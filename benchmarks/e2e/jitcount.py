"""How many Triton kernels an engine compiled: new entries in the writable caches, by kernel name.

Triton writes one folder per compiled binary, with `<kernel>.json` metadata beside the binary (`__grp__*.json`
files only group them). A kernel read from the image's baked cache (kernels.triton_cache:BakedFirstCacheManager) writes
nothing, so a count taken before and after a phase is that phase's JIT compiles. vLLM moves TRITON_CACHE_DIR
under VLLM_CACHE_ROOT when torch.compile runs, so every cache folder of the job is scanned. It moves it per rank
(`torch_compile_cache/<hash>/rank_<r>_<dp>/triton_cache`, vllm/compilation/backends.py): `new_by_rank` says which
rank compiled what, the check that a baked cache serves every rank of a TP8 engine.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

MOE_KERNEL = "fused_moe_kernel"
_RANK_DIR = re.compile(r"^rank_\d+_\d+$")
SHARED = "shared"  # a cache folder outside vLLM's per-rank ones (TRITON_CACHE_DIR before torch.compile moves it)


@dataclass(frozen=True)
class KernelCount:
    by_name: Counter[str] = field(default_factory=Counter)
    paths: frozenset[str] = frozenset()

    def new_since(self, earlier: KernelCount) -> dict[str, int]:
        """Kernel name → binaries that are here and were not in `earlier`."""
        new = Counter(Path(p).stem for p in self.paths - earlier.paths)
        return dict(sorted(new.items()))

    def new_by_rank(self, earlier: KernelCount) -> dict[str, dict[str, int]]:
        """'rank_0_0' (or 'shared') → kernel name → binaries that are new since `earlier`."""
        by_rank: dict[str, Counter[str]] = {}
        for path in self.paths - earlier.paths:
            by_rank.setdefault(rank_of(Path(path)), Counter())[Path(path).stem] += 1
        return {rank: dict(sorted(c.items())) for rank, c in sorted(by_rank.items())}


def rank_of(path: Path) -> str:
    return next((part for part in path.parts if _RANK_DIR.match(part)), SHARED)


def rank_dirs(roots: Iterable[Path]) -> list[str]:
    """The per-rank cache folders vLLM made under these roots (a rank that compiled nothing still has one)."""
    found = {p.name for root in roots if root.is_dir() for p in root.rglob("rank_*") if _RANK_DIR.match(p.name)}
    return sorted(found)


def moe_kernels_by_rank(by_rank: dict[str, dict[str, int]], ranks: Iterable[str] = ()) -> str:
    """'rank_0_0:0;rank_1_0:2' — fused-MoE binaries compiled per rank, every rank in `ranks` listed, zeros too."""
    names = sorted({*ranks, *by_rank})
    return ";".join(f"{rank}:{by_rank.get(rank, {}).get(MOE_KERNEL, 0)}" for rank in names)


def compiled_kernels(roots: Iterable[Path]) -> KernelCount:
    paths = set()
    for root in roots:
        if root.is_dir():
            for meta in root.rglob("*.json"):
                if not meta.name.startswith("__grp__") and any(meta.parent.glob(f"{meta.stem}.*bin")):
                    paths.add(str(meta))
    return KernelCount(Counter(Path(p).stem for p in paths), frozenset(paths))
