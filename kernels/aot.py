"""Ahead-of-time compile of vLLM's Triton fused-MoE kernel for sm_90 into a Triton cache — no GPU.

Data flow: tuned tile files + decode batch sizes + one batch size per Triton specialization any
M in 1..max_tokens reaches (``prefill_sizes``) → every (shape, M, tile) → the kernel launches vLLM
makes for it (GEMM1 and GEMM2, functional ``fused_experts`` path and modular ``TritonExperts`` path) →
deduplicated by Triton specialization → ``JITFunction.warmup`` under a fake driver that reports an
sm_90 target → Triton's own ``compile()`` writes ``TRITON_CACHE_DIR/<hash>/fused_moe_kernel.*``.

Why the cache keys equal the run-time ones: the key is
``sha256(triton_key() - ASTSource.hash() - backend.hash() - options.hash() - env)`` (triton 3.7.1
``compiler/compiler.py`` + ``runtime/cache.py``; 3.7 appends a stage-inspection key only when
``knobs.runtime.add_stages_inspection_hook`` is set, which neither vLLM nor the bake does). We do not
rebuild it: we drive the JIT itself (``warmup`` = ``run(..., warmup=True)``), so the signature, constexprs
and alignment/``==1``/``%16`` attributes come out of Triton's own binder. What must match the GPU host is only:
- the kernel's ``cache_key`` (its source text + callees + starting line): we exec the two
  ``@triton.jit`` functions from vLLM's own ``fused_moe.py`` with their original file name and line
  numbers, so ``inspect.getsourcelines`` returns the same text and line. vLLM is never imported
  (importing it needs CUDA libraries a docker build may not have);
- ``triton_key()``: the same Triton wheel (it hashes libtriton.so, which differs per Python ABI);
- ``backend.hash()``: ptxas version + arch 90 (the wheel's bundled ptxas);
- the argument values' specialization: rebuilt below from vLLM 0.32's ``invoke_fused_moe_triton_kernel``
  (called by ``fused_experts_impl`` and ``TritonExperts.apply``) with meta tensors (data_ptr 0 → 16-byte
  aligned, as every real allocation is); tests/kernels/test_aot.py runs vLLM's own code paths on meta
  tensors and compares every argument;
- the cache path: Triton's group index (``__grp__*.json``) stores ABSOLUTE child paths, so bake into
  the directory the image will use (e.g. ``/opt/triton-cache``), never copy a cache to another path.
The GPU check (``python -m tools.aot_check``, not shipped) counts JIT compilations while vLLM's kernel
runs every baked case and fails on any.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import math
import multiprocessing
import os
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernels.config_files import (
    CONFIG_DIR,
    TILE_KEYS,
    Tile,
    config_file_name,
    lookup,
    read_config_file,
    swap_ab_engaged,
)
from kernels.shapes import SHIPPED, KernelShape, shape_by_key
from kernels.triton_cache import cache_entries

KERNEL_NAMES = ("write_zeros_to_output", "fused_moe_kernel")
KERNEL_MODULE = "vllm.model_executor.layers.fused_moe.fused_moe"
# vLLM 0.32's default CUDA-graph capture sizes (config/vllm.py, _set_cudagraph_sizes) on sm_90, where the default
# ceiling is min(2 * max_num_seqs, 512) (1024 only on the sm_100 family): [1, 2, 4] + range(8, 256, 8) +
# range(256, 513, 16). 0.32 also captures max_num_seqs and max_num_batched_tokens when they fit under the ceiling and
# lie off that grid; those, and eager prefill sizes, are covered by DEFAULT_MAX_TOKENS (every M up to it).
# Launch names start with the vLLM code path that makes them; the tuner times the functional one only.
PATHS = ("functional", "modular", "both")
DECODE_GRAPH_SIZES = (1, 2, 4, *range(8, 256, 8), *range(256, 513, 16))
# Prefill / profile-run token counts go up to max_num_batched_tokens (vLLM 0.32's fused_moe.py does not
# chunk M): bake every specialization any M up to this reaches. 16384 covers vLLM's defaults (0.32 on an
# H200: 8192 for the server, 16384 for the LLM class).
DEFAULT_MAX_TOKENS = 16384


def vllm_fused_moe_source() -> Path:
    """vLLM's fused_moe.py, found without importing vLLM (a spec lookup of the top package only)."""
    env = os.environ.get("MOE_AOT_VLLM_FUSED_MOE_PY")
    if env:
        return Path(env)
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("vllm is not installed here; set MOE_AOT_VLLM_FUSED_MOE_PY to its fused_moe.py")
    return Path(next(iter(spec.submodule_search_locations))) / "model_executor/layers/fused_moe/fused_moe.py"


def load_kernel(source: Path | None = None) -> Any:
    """vLLM's ``fused_moe_kernel`` JITFunction, built from its file with the original lines and name."""
    import triton
    import triton.language as tl

    path = (source or vllm_fused_moe_source()).resolve()
    tree = ast.parse(path.read_text(), filename=str(path))
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in KERNEL_NAMES]
    if sorted(d.name for d in defs) != sorted(KERNEL_NAMES):
        raise RuntimeError(f"{path} lacks one of {KERNEL_NAMES}: vLLM's kernel moved; update kernels/aot.py")
    namespace: dict[str, Any] = {"triton": triton, "tl": tl, "__name__": KERNEL_MODULE}
    exec(compile(ast.Module(body=defs, type_ignores=[]), str(path), "exec"), namespace)
    return namespace["fused_moe_kernel"]


class Sm90Driver:
    """Just enough of Triton's driver for JIT warmup on a machine with no GPU: target sm_90, 32 lanes."""

    def __init__(self) -> None:
        from triton.backends.compiler import GPUTarget

        self.target = GPUTarget("cuda", 90, 32)

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_current_target(self) -> Any:
        return self.target

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("meta")


@dataclass(frozen=True)
class Case:
    """One (shape, batch size, tile) vLLM will run; expands to 3 kernel launches."""

    shape_key: str
    m: int
    tile: tuple[tuple[str, int], ...]
    # the shape itself for one the image does not list (a user's model tuned at bake time: kernels/tuning/gpu.py)
    shape: KernelShape | None = None

    @staticmethod
    def of(shape: KernelShape, m: int, tile: Tile) -> Case:
        return Case(shape.key, m, tuple((k, int(tile[k])) for k in TILE_KEYS), shape)

    def kernel_shape(self) -> KernelShape:
        return self.shape or shape_by_key(self.shape_key)


def _em(shape: KernelShape, m: int, a_rows: int, top_k: int, bm: int) -> tuple[bool, int, int, int]:
    """(naive, EM, sorted_ids length or 0, expert_ids length) as vLLM 0.32 computes them."""
    pairs = m * shape.topk
    # _prepare_expert_assignment, no expert_map, not wna16. Its expert count: global_num_experts in fused_experts,
    # w1.shape[0] in TritonExperts (0.32; the two differ only with ROCm's fused shared experts): shape.e on CUDA.
    naive = pairs * 4 <= shape.e
    if naive:
        return True, a_rows * top_k * bm, 0, pairs
    padded = pairs + shape.e * (bm - 1)  # moe_align_block_size, pad_sorted_ids=False
    if pairs < shape.e:
        padded = min(pairs * bm, padded)
    em = padded
    if a_rows < bm:
        em = min(padded, a_rows * top_k * bm)
    return False, em, padded, math.ceil(padded / bm)


def launches(case: Case) -> Iterator[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """The fused_moe_kernel launches of ``case``, argument for argument as vLLM 0.32 makes them."""
    import torch
    import triton.language as tl

    shape = case.kernel_shape()
    tile = dict(case.tile)
    m, e, h, n, n1, topk = case.m, shape.e, shape.h, shape.n, shape.n1, shape.topk
    block = shape.block_shape
    fp8, f32, i32, bf16 = torch.float8_e4m3fn, torch.float32, torch.int32, torch.bfloat16

    def t(*size: int, dtype: torch.dtype) -> torch.Tensor:
        return torch.empty(size, dtype=dtype, device="meta")

    w1, w2 = t(e, n1, h, dtype=fp8), t(e, h, n, dtype=fp8)
    topk_weights = t(m, topk, dtype=f32)
    gemms = []
    on_input = shape.model.router_weight_on_input
    for path in ("functional", "modular"):
        # GEMM1: hidden (M, H) → cache1 (M, topk, N1). The modular TritonExperts passes no router weights.
        g1_weights = topk_weights if path == "functional" else None
        g1_mul = on_input if path == "functional" else False
        gemms.append((f"{path}/gemm1", t(m, h, dtype=fp8), w1, t(m, topk, n1, dtype=bf16), g1_weights, g1_mul, topk))
    # GEMM2 is launched identically by both paths: cache2 (M·topk, N) → cache3 (M, topk, H).
    cache2, cache3 = t(m * topk, n, dtype=fp8), t(m, topk, h, dtype=bf16)
    gemms.append(("both/gemm2", cache2, w2, cache3, topk_weights, not on_input, 1))

    for name, a, b, c, weights, mul_routed, top_k in gemms:
        bm = tile["BLOCK_SIZE_M"]
        naive, em, sorted_len, eids_len = _em(shape, m, a.size(0), top_k, bm)
        sorted_ids = None if naive else t(sorted_len, dtype=i32)
        expert_ids, ntp = t(eids_len, dtype=i32), t(1, dtype=i32)
        if block:
            a_scale = t(a.size(0), a.size(1) // block[1], dtype=f32)  # per-token-group, row-major
            b_scale = t(e, b.size(1) // block[0], b.size(2) // block[1], dtype=f32)
        else:  # static per-tensor: vLLM's 0-d activation scale (max over experts), reshaped to (1,) by the launcher
            a_scale, b_scale = t(1, dtype=f32), t(e, dtype=f32)
        block_k = min(tile["BLOCK_SIZE_K"], min(block)) if block else tile["BLOCK_SIZE_K"]
        args = (
            a, b, c, None, a_scale, b_scale, weights, sorted_ids, expert_ids, ntp,
            b.size(1), b.size(2), em, a.size(0) * top_k,
            a.stride(0), a.stride(1), b.stride(0), b.stride(2), b.stride(1), c.stride(1), c.stride(2),
            a_scale.stride(0) if a_scale.ndim == 2 else 0,
            a_scale.stride(1) if a_scale.ndim == 2 else 0,
            b_scale.stride(0) if b_scale.ndim >= 2 else 0,
            b_scale.stride(2) if b_scale.ndim == 3 else 0,
            b_scale.stride(1) if b_scale.ndim >= 2 else 0,
            0, 0,  # bias strides (no bias)
            0 if block is None else block[0], 0 if block is None else block[1],
        )  # fmt: skip
        kwargs = dict(
            MUL_ROUTED_WEIGHT=mul_routed, top_k=top_k, compute_type=tl.bfloat16, use_fp8_w8a8=True,
            use_int8_w8a8=False, use_int8_w8a16=False, per_channel_quant=False, naive_block_assignment=naive,
            HAS_BIAS=False, BLOCK_SIZE_K=block_k, SWAP_AB=swap_ab_engaged(tile),
            USE_TD=False,  # 0.32's tensor-descriptor path: never with quantized weights (resolve_moe_use_td)
            BLOCK_SIZE_M=bm, BLOCK_SIZE_N=tile["BLOCK_SIZE_N"], GROUP_SIZE_M=tile["GROUP_SIZE_M"], SPLIT_K=1,
            num_warps=tile["num_warps"], num_stages=tile["num_stages"],
        )  # fmt: skip
        yield name, args, kwargs


def _int_class(v: Any) -> str:
    """Triton's integer specialization class (==1 → constexpr, %16 → divisible, else plain)."""
    if isinstance(v, bool) or not isinstance(v, int):
        return "x" if v is None else "t"
    return "1" if v == 1 else ("D" if v % 16 == 0 else "i")


def variant_key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """Two launches with the same key hit the same binary (pointer dtypes + int classes + constexprs)."""
    sig = tuple(str(a.dtype) if hasattr(a, "dtype") else _int_class(a) for a in args)
    return sig, tuple(sorted((k, str(v)) for k, v in kwargs.items()))


def spec_key(shape: KernelShape, m: int, tile: Tile) -> tuple[Any, ...]:
    """What in vLLM's launches for batch size ``m`` changes with ``m`` and reaches ``variant_key``.

    Per launch only these depend on M (``launches``): the tile (closest tuned M), the naive/aligned
    path (tensor vs None ``sorted_token_ids``, a constexpr), and the Triton int classes of EM and
    num_valid_tokens (a.size(0)·top_k). N, K, strides and scale strides are fixed per shape. GEMM1 of
    both paths has the same A rows and top_k, so one (naive, EM, valid) triple per GEMM suffices.
    Equal keys ⇒ equal variant keys (tests/kernels/test_aot.py checks that against the real launches).
    """
    bm = int(tile["BLOCK_SIZE_M"])
    key: list[Any] = [tuple((k, int(tile[k])) for k in TILE_KEYS)]
    for a_rows, top_k in ((m, shape.topk), (m * shape.topk, 1)):  # GEMM1 (both paths), GEMM2
        naive, em, _, _ = _em(shape, m, a_rows, top_k, bm)
        key.append((naive, _int_class(em), _int_class(a_rows * top_k)))
    return tuple(key)


def prefill_sizes(shape: KernelShape, table: Mapping[int, Tile], max_tokens: int) -> dict[tuple[Any, ...], int]:
    """The smallest M in 1..max_tokens for each distinct ``spec_key``: baking these covers every M."""
    reps: dict[tuple[Any, ...], int] = {}
    for m in range(1, max_tokens + 1):
        reps.setdefault(spec_key(shape, m, lookup(table, m)), m)
    return reps


_KERNEL: Any = None


def _compile_one(case: Case, index: int, source: str | None) -> float:
    """Worker: compile one launch for sm_90 under the fake driver; returns seconds spent."""
    global _KERNEL
    from triton.runtime.driver import driver

    if _KERNEL is None:
        driver.set_active(Sm90Driver())
        _KERNEL = load_kernel(Path(source) if source else None)
    t0 = time.perf_counter()
    _, args, kwargs = list(launches(case))[index]
    _KERNEL.warmup(*args, grid=(1,), **kwargs)
    return time.perf_counter() - t0


class CompilePool:
    """Spawned worker processes that compile launches into ``$TRITON_CACHE_DIR`` (no GPU work).

    spawn, not fork: the caller (the tuner) may hold a CUDA context, which must not be forked.
    ``submit`` skips variants already submitted, so overlapping case lists cost nothing twice.
    """

    def __init__(self, workers: int, source: Path | None = None) -> None:
        self.source = str(source) if source else None
        self.seen: set[tuple[Any, ...]] = set()
        self.pool = (
            ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
            if workers > 1
            else None
        )

    def submit(self, cases: Iterable[Case], paths: tuple[str, ...] = PATHS) -> list[Future[float]]:
        futures = []
        for case in cases:
            for i, (name, args, kwargs) in enumerate(launches(case)):
                key = variant_key(args, kwargs)
                if not name.startswith(paths) or key in self.seen:
                    continue
                self.seen.add(key)
                if self.pool is None:
                    f: Future[float] = Future()
                    f.set_result(_compile_one(case, i, self.source))
                else:
                    f = self.pool.submit(_compile_one, case, i, self.source)
                futures.append(f)
        return futures

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> CompilePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_all(futures: list[Future[float]], desc: str, progress: bool = True) -> int:
    """Wait for compiles; a failed compile is re-raised (a tile the compiler rejects is a bug upstream)."""
    bar = _progress(len(futures), desc) if progress and futures else None
    for f in as_completed(futures):
        f.result()
        if bar:
            bar.update(1)
    if bar:
        bar.close()
    return len(futures)


def compile_cases(cases: Iterable[Case], workers: int, source: Path | None = None, progress: bool = True) -> int:
    """Compile every distinct variant of ``cases`` (both vLLM paths) and wait; returns the count."""
    with CompilePool(workers, source) as pool:
        return wait_all(pool.submit(cases), "aot compile", progress)


def _progress(total: int, desc: str) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, file=sys.stderr, mininterval=2.0)


def vllm_config_dir(source: Path | None = None) -> Path | None:
    """vLLM's own tuned-config folder beside its fused_moe.py (``configs/``), or None where vLLM is absent.

    vLLM 0.32's ``get_moe_configs`` looks in ``VLLM_TUNED_CONFIG_FOLDER`` first, then in this folder,
    then falls back to its default tiles; the bake mirrors the first two.
    """
    try:
        path = (source or vllm_fused_moe_source()).resolve().parent / "configs"
    except RuntimeError:
        return None
    return path if path.is_dir() else None


def config_source(config_dir: Path, shape: KernelShape, fallback_dir: Path | None = None) -> Path | None:
    """The file vLLM will load for ``shape`` on an H200: ours, else vLLM's shipped one, else None (default tiles)."""
    name = config_file_name(shape.e, shape.n, shape.dtype, shape.block_shape)
    for folder in (config_dir, fallback_dir):
        if folder is not None and (folder / name).is_file():
            return folder / name
    return None


def cases_from_configs(
    config_dir: Path,
    batch_sizes: Iterable[int] = DECODE_GRAPH_SIZES,
    shapes: Iterable[KernelShape] = SHIPPED,
    max_tokens: int = 0,
    fallback_dir: Path | None = None,
) -> list[Case]:
    """(shape, M, tile) for every shape with a file vLLM will load (``config_source``): the ``batch_sizes``
    (decode graph sizes), plus, when ``max_tokens`` > 0, one M per specialization any batch of
    1..max_tokens tokens reaches (prefill)."""
    out = []
    for shape in shapes:
        path = config_source(config_dir, shape, fallback_dir)
        if path is None:
            continue
        table = read_config_file(path)
        sizes = sorted(set(batch_sizes) | set(prefill_sizes(shape, table, max_tokens).values()))
        out.extend(Case.of(shape, m, lookup(table, m)) for m in sizes)
    return out


MAX_TOKENS_HELP = (
    "also bake one batch size per kernel specialization any batch of 1..N tokens reaches (prefill, "
    "profile run); N >= the engine's max_num_batched_tokens; 0 = --batch-sizes only"
)


def _max_tokens(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"--max-tokens={text!r}: expected an integer >= 0 (0 = decode sizes only)")
    return value


def add_case_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that pick the cache and the (shape, M, tile) cases: shared by ``bake`` and the GPU check that
    runs the baked cases (tools/aot_check.py), so both enumerate the same cases."""
    parser.add_argument("--cache-dir", type=Path, required=True, help="TRITON_CACHE_DIR; bake at the final path")
    parser.add_argument("--config-dir", type=Path, default=CONFIG_DIR)
    parser.add_argument("--batch-sizes", default=",".join(map(str, DECODE_GRAPH_SIZES)))
    parser.add_argument("--max-tokens", type=_max_tokens, default=DEFAULT_MAX_TOKENS, help=MAX_TOKENS_HELP)
    parser.add_argument("--shapes", default="", help="comma-separated shape keys (default: all shipped)")


def selected_shapes(args: argparse.Namespace) -> list[KernelShape]:
    return [shape_by_key(s) for s in args.shapes.split(",") if s] or list(SHIPPED)


def selected_cases(args: argparse.Namespace, fallback_dir: Path | None) -> list[Case]:
    sizes = [int(x) for x in args.batch_sizes.split(",") if x]
    return cases_from_configs(args.config_dir, sizes, selected_shapes(args), args.max_tokens, fallback_dir)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernels.aot", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bake", help="compile every variant the shipped configs need (no GPU needed)")
    add_case_arguments(b)
    b.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    b.add_argument("--vllm-source", type=Path, default=None, help="vLLM's fused_moe.py (default: installed vllm)")
    args = p.parse_args(argv)
    os.environ["TRITON_CACHE_DIR"] = str(args.cache_dir.resolve())
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    fallback = vllm_config_dir(args.vllm_source)
    cases = selected_cases(args, fallback)
    for shape in selected_shapes(args):
        src = config_source(args.config_dir, shape, fallback)
        print(f"bake {shape.key}: {src if src else 'no tuned file: vLLM default tiles, not baked'}")
    if not cases:
        print(f"no shipped config matches the requested shapes in {args.config_dir}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    n = compile_cases(cases, args.workers, args.vllm_source)
    entries = len(cache_entries(args.cache_dir))
    summary = {"cases": len(cases), "variants": n, "cache_entries": entries, "seconds": time.perf_counter() - t0}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
