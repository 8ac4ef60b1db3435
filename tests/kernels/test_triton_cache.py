"""kernels/triton_cache.py: every engine process reads the baked Triton cache first, whatever TRITON_CACHE_DIR says.

The end-to-end check runs the real bake (tests/kernels/conftest.py) and loads it under Triton 3.7.1 after moving
TRITON_CACHE_DIR as vLLM does under torch.compile; the unit tests drive the manager's lookups on folders made here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernels.triton_cache import BAKED_ENV, TRITON_CACHE_MANAGER, BakedFirstCacheManager, cache_entries
from tests.kernels.bake import compile_counts

KEY = "abc123"


def test_baked_first_manager_serves_the_baked_cache_after_vllm_moves_triton_cache_dir(baked, tmp_path):
    cache, cfg, env, _ = baked
    moved = dict(env, TRITON_CACHE_DIR=str(tmp_path / "vllm-compile-cache" / "triton_cache"))
    moved.update(TRITON_CACHE_MANAGER=TRITON_CACHE_MANAGER, MOE_BAKED_TRITON_CACHE=str(cache))
    assert compile_counts(cfg, moved) == {"misses": {}, "hits": {"fused_moe_kernel": 3}}
    # control: the same moved cache dir without the manager recompiles everything
    del moved["TRITON_CACHE_MANAGER"]
    moved["TRITON_CACHE_DIR"] = str(tmp_path / "other")
    assert compile_counts(cfg, moved)["misses"] == {"fused_moe_kernel": 3}


def test_the_env_value_names_the_class_triton_imports():
    module, _, name = TRITON_CACHE_MANAGER.partition(":")
    assert (module, name) == ("kernels.triton_cache", "BakedFirstCacheManager")


@pytest.fixture
def caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(baked root, writable TRITON_CACHE_DIR): the baked one holds entry KEY with a kernel file and a group index."""
    baked, writable = tmp_path / "baked", tmp_path / "writable"
    entry = baked / KEY
    entry.mkdir(parents=True)
    (entry / "k.cubin").write_bytes(b"baked")
    (entry / "__grp__k.json").write_text(json.dumps({"child_paths": {"k.cubin": str(entry / "k.cubin")}}))
    monkeypatch.setenv(BAKED_ENV, str(baked))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(writable))
    return baked, writable


def test_a_file_in_the_baked_cache_is_served_from_there(caches):
    baked, _ = caches
    manager = BakedFirstCacheManager(KEY)
    assert manager.get_file("k.cubin") == str(baked / KEY / "k.cubin")
    assert manager.get_group("k.json") == {"k.cubin": str(baked / KEY / "k.cubin")}


def test_what_the_baked_cache_lacks_comes_from_the_writable_one(caches):
    _, writable = caches
    manager = BakedFirstCacheManager(KEY)
    written = manager.put(b"fresh", "other.cubin")
    assert Path(written).is_relative_to(writable) and manager.get_file("other.cubin") == written


def test_a_group_index_whose_children_are_gone_is_not_served(caches):
    baked, _ = caches
    (baked / KEY / "k.cubin").unlink()
    assert BakedFirstCacheManager(KEY).get_group("k.json") is None


def test_override_and_dump_managers_never_read_the_baked_cache(caches):
    for kwargs in ({"override": True}, {"dump": True}):
        assert BakedFirstCacheManager(KEY, **kwargs).baked_dir is None, kwargs


def test_cache_entries_counts_directories_holding_a_compiled_fused_moe_kernel(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "fused_moe_kernel.json").write_text("{}")
    (tmp_path / "b").mkdir()  # a half-written entry: no metadata
    assert cache_entries(tmp_path) == {"a"}
    assert cache_entries(tmp_path / "missing") == set()
