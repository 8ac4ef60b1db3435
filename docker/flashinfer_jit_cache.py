"""Build FlashInfer's JIT modules that every engine start compiles, into the image's FlashInfer workspace.

Why: flashinfer-python from PyPI ships CUDA sources, not binaries (the prebuilt `flashinfer-jit-cache` wheel is
not on PyPI; flashinfer-cubin stops at 0.6.13). vLLM 0.32 samples with FlashInfer's top-k/top-p kernels on CUDA by
default
(`VLLM_USE_FLASHINFER_SAMPLER`, vllm/v1/sample/ops/topk_topp_sampler.py) and warms the sampler up during the
memory profile, so FlashInfer's `sampling` module is compiled by nvcc on the first engine start of every fresh
container — whatever the MoE backend, ~80-130 s on an H200 host (docs/results/start-time.md). On SageMaker every
new instance is a fresh container.

How: FlashInfer builds a module with ninja in `$FLASHINFER_WORKSPACE_BASE/.cache/flashinfer/<version>/<archs>/
cached_ops/<name>/` and, at run time, re-runs ninja there before loading it (flashinfer/jit/core.py,
`JitSpec.build_and_load`). `<archs>` is the GPUs' normalised capabilities (compilation_context.py: an H100/H200
is `90a`), so a module built here with FLASHINFER_CUDA_ARCH_LIST="9.0a" (no GPU needed) sits exactly where an
H100/H200 looks, and ninja finds nothing to do. Other GPUs (B200: `100a`) look elsewhere and JIT-compile as
before: nothing breaks. The same paths, nvcc and flags are needed at run time, so this runs inside the image,
and the check below re-runs ninja in a fresh process as the engine will, and fails unless it has nothing to do.

Measured in the cuda image build on a 2-core machine (nvcc 13.0 from the CUDA wheels): sampling 122 s. The SM90 CUTLASS
fused-MoE module (`fused_moe_90`, what `--moe-backend auto` / flashinfer_cutlass runs for per-tensor FP8 on Hopper) is
241 nvcc objects in 0.7.0.post1: hours on 2 cores, so it is not built by default (docs/image.md).

usage: python3 flashinfer_jit_cache.py --workspace DIR [--archs "9.0a 10.0a"] [--modules sampling,trtllm_utils]
                                      [--check]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

# name -> (module, generator) of flashinfer 0.7.0.post1's JitSpec factories
MODULES = {
    "sampling": ("flashinfer.jit.sampling", "gen_sampling_module"),  # vLLM's sampler, every engine start
    "trtllm_utils": ("flashinfer.jit.tllm_utils", "gen_trtllm_utils_module"),  # FlashInfer autotuner's delay kernel
    "fused_moe_90": ("flashinfer.jit.fused_moe", "gen_cutlass_fused_moe_sm90_module"),  # CUTLASS MoE, SM90
}
CHECK = """
import importlib, json, subprocess, sys
from flashinfer.jit import env
spec = getattr(importlib.import_module(sys.argv[1]), sys.argv[2])()
spec.write_ninja()  # what build_and_load does first: rewrites build.ninja only if its text changed
dry = subprocess.run(["ninja", "-n", "-C", str(spec.build_dir), "-f", str(spec.ninja_path)],
                     capture_output=True, text=True)
print(json.dumps({"so": str(spec.jit_library_path), "exists": spec.jit_library_path.exists(),
                  "ninja": dry.stdout.strip().splitlines()[-1:], "workspace": str(env.FLASHINFER_WORKSPACE_DIR)}))
"""


def build(name: str, env: dict[str, str]) -> float:
    module, factory = MODULES[name]
    code = f"import importlib; getattr(importlib.import_module({module!r}), {factory!r})().build(verbose=False)"
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    return time.monotonic() - t0


def up_to_date(name: str, env: dict[str, str]) -> dict[str, object]:
    """A fresh process, as the engine: build.ninja unchanged and ninja with nothing to do."""
    module, factory = MODULES[name]
    out = subprocess.run(
        [sys.executable, "-c", CHECK, module, factory], env=env, check=True, capture_output=True, text=True
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    report["ok"] = bool(report["exists"]) and report["ninja"] == ["ninja: no work to do."]
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workspace", required=True, help="FLASHINFER_WORKSPACE_BASE of the image (its final path)")
    p.add_argument(
        "--archs",
        default="9.0a",
        help="space-separated; each is built on its own, into the folder a host of that one architecture looks in "
        '(default "9.0a": H100/H200; add 10.0a for B200)',
    )
    p.add_argument("--modules", default="sampling", help=f"comma list of {sorted(MODULES)}")
    p.add_argument("--check", action="store_true", help="build nothing: only check that each module is up to date")
    args = p.parse_args(argv)
    names = [m for m in args.modules.split(",") if m]
    unknown = [m for m in names if m not in MODULES]
    if unknown:
        p.error(f"--modules: unknown {unknown}; accepted: {sorted(MODULES)}")
    failed = 0
    for arch in args.archs.split():
        # One arch per build: the folder name joins the target archs, and a host computes it from its own GPUs.
        env = {**os.environ, "FLASHINFER_WORKSPACE_BASE": args.workspace, "FLASHINFER_CUDA_ARCH_LIST": arch}
        for name in names:
            seconds = 0.0 if args.check else build(name, env)
            report = up_to_date(name, env)
            failed += not report["ok"]
            print(json.dumps({"module": name, "arch": arch, "build_s": round(seconds, 1), **report}), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
