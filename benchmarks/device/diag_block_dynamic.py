"""Why did the block-scale, dynamic-activation DeepSeek-V3 cases miss the bf16 tolerance on an H200?

Answered 2026-11-30 (ops/fp8_quant.py; logs in benchmarks/results/kernels/logs/2026-11-30b/): Triton's approximate
fp32 division on the GPU. Kept to re-check after kernel changes
(`DIAG=1 bash benchmarks/device/kernels_check_and_bench.sh`).
A run of the same GPU-generated problem under Triton 3.6's CPU interpreter was tried and dropped: that interpreter
fails on our kernels (`range(0, n_rows, BLOCK_M)`: "only 0-dimensional arrays can be converted"); 3.9's runs them.

2026-11-30: `make test-gpu` failed `test_gpu_model_shapes[dynamic-{1,4,64,256}-deepseek-v3-tp8]` with rel err
0.013-0.016 (tolerance 0.01) while the static block cases at the same shape, every per-tensor/per-channel case,
and the same dynamic problem under the CPU interpreter (0.0034) pass. This prints one table that separates
the suspects, on the GPU, against the same float64 reference:

- scales: block static / block dynamic / per-tensor dynamic at the same shape (block-specific or shape-specific?);
- accumulation: Triton's sm_90 default for FP8 dots (imprecise, `max_num_imprecise_acc_default = 2**30`) vs
  precise (0), by rebuilding the CUDA backend's options — a separate compile, a separate cache entry;
- config: the default config vs split-K 1 (the last-arrival fix-up out of the picture);
- top-k 8 vs 1 (the slot reduction out of the picture);
- and what precise accumulation costs: µs per call, default vs precise, weights from HBM.

    PYTHONPATH=$PWD python3 -m benchmarks.device.diag_block_dynamic [--out DIR]     (~2 min on an H200)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch


@contextmanager
def fp8_accumulation(precise: bool):
    """Within the block, our kernels compiled for sm_90 use precise (max_num_imprecise_acc=0) FP8 accumulation.

    Triton's in-memory kernel cache is keyed by the launch arguments, not the parsed options, so the kernels'
    per-device caches are dropped on entry and exit (the on-disk cache key does include the options)."""
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.runtime.jit import JITFunction

    from ops import fused_moe_fp8_kernels as K

    jitted = [fn for fn in vars(K).values() if isinstance(fn, JITFunction)]
    original = CUDABackend.parse_options

    def parse_options(self: Any, opts: dict) -> Any:
        options = original(self, opts)
        return dataclasses.replace(options, max_num_imprecise_acc_default=0) if precise else options

    CUDABackend.parse_options = parse_options
    for fn in jitted:
        fn.device_caches.clear()
    try:
        yield
    finally:
        CUDABackend.parse_options = original
        for fn in jitted:
            fn.device_caches.clear()


def measure(
    m: int,
    top_k: int,
    scales: str,
    static: bool | tuple[bool, bool],
    precise: bool = False,
    shape: tuple[int, int, int] = (256, 7168, 256),
    **config_changes: int,
) -> float:
    """rel err of our kernel against the float64 reference; shape (E, H, I) defaults to DeepSeek-V3 TP8.

    static: both activation scales static (True) / dynamic (False), or (x static?, act static?) to split the two
    GEMMs apart; config_changes override fields of the default config (num_stages=1, split_k=1, ...)."""
    from ops.fused_moe_fp8 import default_config, fused_moe_fp8
    from ops.problems import fused_moe_problem
    from ops.reference import fused_moe_reference, rel_err

    e, h, inter = shape
    x_static, act_static = static if isinstance(static, tuple) else (static, static)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    static_any = x_static or act_static
    args, kw = fused_moe_problem(m, e, top_k, h, inter, scales=scales, static=static_any, seed=m, device=device)
    if not x_static:
        kw.pop("a13_scale", None)
    if not act_static:
        kw.pop("a2_scale", None)
    config = dataclasses.replace(default_config(m, e, top_k, h, inter), **config_changes)
    out = torch.full_like(args[0], float("nan"))
    with fp8_accumulation(precise):
        fused_moe_fp8(*args, **kw, out=out, config=config)
    if out.is_cuda:
        torch.cuda.synchronize()
    return rel_err(out, fused_moe_reference(*args, **kw))


def time_us(key: str, m: int, precise: bool) -> float:
    """µs per call of our kernel (default config) for shape `key`, weights from HBM (bench_fused_moe's timing)."""
    from kernels.shapes import shape_by_key
    from ops.fused_moe_fp8 import fused_moe_fp8
    from tools.measure import graph_us
    from tools.moe_harness import PlainMoEProblem, rotations

    s = shape_by_key(key)
    problem = PlainMoEProblem(s)
    scales = problem.scales
    batch = problem.inputs(m, rotations(s, m))
    act = "silu" if s.model.gated else "relu2"

    def run() -> None:
        for x, w, ids in batch:
            fused_moe_fp8(x, problem.w1, problem.w2, w, ids, **scales, activation=act)

    with fp8_accumulation(precise):
        return graph_us(run, calls=len(batch))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.device.diag_block_dynamic")
    p.add_argument("--out", type=Path, default=None, help="also write diag_block_dynamic.json there")
    p.add_argument("--timings", action="store_true", help="also time default vs precise accumulation (v1)")
    ns = p.parse_args(argv)
    rows = []
    # v1 (2026-11-30, benchmarks/results/kernels/logs/2026-11-30b/diag_v1.log): precise accumulation, split-K 1 and
    # top-1 change nothing; static block and dynamic per-tensor pass. v2 splits the GEMMs and the pipeline apart.
    print(f"{'M':>3} {'k':>2} {'x scale':>8} {'act scale':>9} {'config':>12}  rel err (tolerance 0.01)")
    cases: list[tuple[int, bool, bool, dict]] = []
    for m in (1, 64):
        cases += [(m, xs, acts, {}) for xs, acts in ((False, False), (True, False), (False, True), (True, True))]
        cases += [(m, False, False, {"num_stages": st}) for st in (1, 2, 4)]
        cases += [(m, False, False, {"num_warps": 8})]
    for m, xs, acts, changes in cases:
        err = measure(m, 8, "block", (xs, acts), **changes)
        label = ",".join(f"{k}={v}" for k, v in changes.items()) or "default"
        rows.append(dict(m=m, top_k=8, x_static=xs, act_static=acts, config=label, rel_err=err))
        print(f"{m:>3} {8:>2} {'static' if xs else 'dynamic':>8} {'static' if acts else 'dynamic':>9} {label:>12}  "
              f"{err:.4f}{'  FAIL' if err >= 0.01 else ''}", flush=True)  # fmt: skip
    # what precise accumulation would cost: block-dynamic DeepSeek-V3 and static per-tensor Qwen3
    timings = []
    if ns.timings and torch.cuda.is_available():
        print(f"{'shape':>22} {'M':>3}  default µs  precise µs  precise/default")
        for key in ("deepseek-v3:tp8", "qwen3-30b-a3b:tp1"):
            for m in (1, 4, 16, 64):
                d, p = time_us(key, m, False), time_us(key, m, True)
                timings.append(dict(shape=key, m=m, default_us=d, precise_us=p))
                print(f"{key:>22} {m:>3}  {d:10.2f}  {p:10.2f}  {p / d:15.3f}", flush=True)
    if ns.out:
        ns.out.mkdir(parents=True, exist_ok=True)
        (ns.out / "diag_block_dynamic.json").write_text(json.dumps({"errors": rows, "timings": timings}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
