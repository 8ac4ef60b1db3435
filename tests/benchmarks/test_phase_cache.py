"""The Triton cache a run's engines share (benchmarks/e2e/phase_cache.py), read through the image's cache manager.

Triton's own FileCacheManager writes the kernels here, as an engine's compile would (a CPU has no GPU to compile
for, but the cache layout is Triton's, not a copy of it); the second engine's manager must then find the first
engine's kernel in the shared folder and not in its own, empty, cache.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from benchmarks.e2e.phase_cache import EMPTY, PhaseTritonCache

cache_module = pytest.importorskip("triton.runtime.cache")


def compile_into(cache_dir: Path, key: str, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What Triton leaves for one compiled kernel: its binary, its metadata and the group file listing them."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache_dir))
    manager = cache_module.FileCacheManager(key)
    binary = manager.put(b"\x7fELF-cubin", f"{name}.cubin", binary=True)
    meta = manager.put(json.dumps({"name": name}), f"{name}.json", binary=False)
    manager.put_group(f"{name}.json", {f"{name}.cubin": binary, f"{name}.json": meta})


def test_a_later_engine_reads_what_an_earlier_one_compiled_through_the_images_manager(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = PhaseTritonCache(tmp_path / "phase")
    assert shared.describe() == EMPTY  # the first engine starts from empty caches, as every row did before
    # vLLM moves TRITON_CACHE_DIR under its torch.compile folder, per rank: absorb finds the kernels there
    first = tmp_path / "engine-a" / "vllm" / "torch_compile_cache" / "abc" / "rank_0_0" / "triton_cache"
    compile_into(first, "k1", "_causal_conv1d_fwd_kernel", monkeypatch)
    compile_into(first, "k2", "fused_moe_kernel", monkeypatch)
    assert shared.absorb(tmp_path / "engine-a") == 2
    assert shared.absorb(tmp_path / "engine-a") == 0  # a kernel is copied once
    assert shared.describe() == "empty + 2 Triton kernels of the run's earlier engines"

    own = tmp_path / "engine-b" / "triton"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(own))
    for key, value in shared.env().items():
        monkeypatch.setenv(key, value)
    module, _, cls = shared.env()["TRITON_CACHE_MANAGER"].partition(":")
    manager = getattr(importlib.import_module(module), cls)("k1")
    found = manager.get_file("_causal_conv1d_fwd_kernel.cubin")
    assert found == str(tmp_path / "phase" / "k1" / "_causal_conv1d_fwd_kernel.cubin")
    assert Path(found).read_bytes() == b"\x7fELF-cubin"
    assert manager.get_group("_causal_conv1d_fwd_kernel.json")  # Triton's lookup of a compiled kernel hits
    assert not own.exists() or not any(own.rglob("*.cubin"))  # nothing was compiled into the engine's own cache
    assert cache_module.FileCacheManager("k3").get_group("x.json") is None  # a new kernel still compiles


def test_a_new_run_does_not_see_the_last_runs_kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compile_into(tmp_path / "engine-a", "k1", "fused_moe_kernel", monkeypatch)
    PhaseTritonCache(tmp_path / "phase").absorb(tmp_path / "engine-a")
    assert PhaseTritonCache(tmp_path / "phase").kernels() == 0


def test_group_files_alone_are_not_kernels(tmp_path: Path) -> None:
    lonely = tmp_path / "engine" / "k9"
    lonely.mkdir(parents=True)
    (lonely / "__grp__fused_moe_kernel.json").write_text("{}")
    (lonely / "fused_moe_kernel.json").write_text("{}")  # metadata without its binary: a compile cut short
    assert PhaseTritonCache(tmp_path / "phase").absorb(tmp_path / "engine") == 0
