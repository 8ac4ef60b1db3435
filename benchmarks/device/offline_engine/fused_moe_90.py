"""FlashInfer's SM90 CUTLASS fused-MoE module (`fused_moe_90`), pruned to what FP8 x FP8 -> BF16 MoE needs.

Why: `--moe-backend auto` on Hopper runs FlashInfer CUTLASS for per-tensor FP8 MoE (vLLM 0.32's oracle), and
flashinfer-python 0.7.0.post1 from PyPI ships only its sources: 247 compile steps, hours on a 2-core machine and
~30 min on the device host's 16 cores, out of a 30-minute lease. Only the grouped GEMMs instantiated for
`Sm90, __nv_fp8_e4m3, __nv_fp8_e4m3, __nv_bfloat16` run for an FP8 checkpoint with bf16 activations, so this keeps
those generated files (and inside them drops the fp16-output instantiations), the module's own sources, and the
fp8 x fp8 static kernels; every other dtype's kernel is left out.

The module's function-pointer tables still name the left-out instantiations. `stubs` writes, for every such
undefined symbol bound at load time, a C function that prints "pruned fused_moe_90: SYMBOL not compiled" and aborts;
linked in, the module loads, and a call into another dtype ends the process with that line instead of running.

Installed as `flashinfer/data/aot/fused_moe_90/fused_moe_90.so`, FlashInfer loads it as a prebuilt (AOT) module
(flashinfer/jit/env.py `get_aot_path`) and never looks at a JIT build. build_fused_moe_90.sh runs the steps inside
the cuda image, with its nvcc and FlashInfer.

    python3 fused_moe_90.py prune BUILD_DIR GEN_DIR   writes BUILD_DIR/build.pruned.ninja, edits kept GEN_DIR files
    python3 fused_moe_90.py stubs SO > stubs.c        the abort stubs for SO's load-time undefined symbols
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

KEEP_SIGNATURE = "Sm90, __nv_fp8_e4m3, __nv_fp8_e4m3, __nv_bfloat16"
# the module's static per-dtype kernel files (tensorrt_llm/.../moe_gemm/moe_gemm_kernels_<A>_<W>.cu) kept: fp8 x fp8
KEPT_STATIC_DTYPES = {"fp8_fp8"}
FP16_OUTPUT = re.compile(
    r"#if defined\(ENABLE_FP8\) && defined\(ENABLE_FP8\)(\s+INSTANTIATE_TMA_WARP_SPECIALIZED_MOE_GEMM\("
    r"Sm90, __nv_fp8_e4m3, __nv_fp8_e4m3, half,)"
)
STATIC_DTYPE = re.compile(r"moe_gemm_kernels_(\w+)\.cu$")


def kept_generated(gen_dir: Path) -> set[Path]:
    return {p.resolve() for p in gen_dir.rglob("*.generated.cu") if KEEP_SIGNATURE in p.read_text()}


def prune(build_dir: Path, gen_dir: Path) -> tuple[int, int, int]:
    """(objects kept, objects left out, fp16-output instantiations disabled)."""
    keep = kept_generated(gen_dir)
    lines = (build_dir / "build.ninja").read_text().split("\n")
    out: list[str] = []
    kept: list[str] = []
    dropped = 0
    for line in lines:
        if line.startswith("build ") and (": cuda_compile " in line or ": compile " in line):
            obj, rest = line[len("build ") :].split(": ", 1)
            src = rest.split(" ", 1)[1].strip()
            static = STATIC_DTYPE.search(src)
            if (".generated.cu" in src and Path(src).resolve() not in keep) or (
                static and static.group(1) not in KEPT_STATIC_DTYPES
            ):
                dropped += 1
                continue
            kept.append(obj)
        out.append(line)
    for i, line in enumerate(out):
        if line.startswith("build ") and ": link " in line:
            target = line[len("build ") :].split(": ", 1)[0]
            out[i] = f"build {target}: link " + " ".join(kept)
    (build_dir / "build.pruned.ninja").write_text("\n".join(out))
    disabled = 0
    for path in keep:
        text, n = FP16_OUTPUT.subn(r"#if 0\1", path.read_text())
        if n:
            path.write_text(text)
            disabled += n
    return len(kept), dropped, disabled


def load_time_undefined(so: Path) -> list[str]:
    """TensorRT-LLM symbols SO leaves undefined and binds at load time (GLOB_DAT / absolute relocations: the
    function-pointer tables); a symbol only reached through the PLT fails lazily, at its first call."""
    undefined = {
        line.split()[-1]
        for line in subprocess.check_output(["nm", "-D", "--undefined-only", str(so)], text=True).splitlines()
    }
    bound = set()
    for line in subprocess.check_output(["readelf", "-rW", str(so)], text=True).splitlines():
        cols = line.split()
        if len(cols) >= 5 and ("GLOB_DAT" in cols[2] or cols[2] == "R_X86_64_64"):
            bound.add(cols[4])
    return sorted(s for s in undefined & bound if s.startswith("_ZN12tensorrt_llm"))


def stubs_source(symbols: list[str]) -> str:
    lines = [
        "#include <stdio.h>",
        "#include <stdlib.h>",
        "static void pruned(const char* s) {",
        '    fprintf(stderr, "pruned fused_moe_90: %s not compiled\\n", s);',
        "    abort();",
        "}",
    ]
    for i, sym in enumerate(symbols):
        lines.append(f'void pruned_{i}(void) __asm__("{sym}");')
        lines.append(f'void pruned_{i}(void) {{ pruned("{sym}"); }}')
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prune")
    p.add_argument("build_dir", type=Path)
    p.add_argument("gen_dir", type=Path)
    s = sub.add_parser("stubs")
    s.add_argument("so", type=Path)
    args = parser.parse_args(argv)
    if args.command == "prune":
        kept, dropped, disabled = prune(args.build_dir, args.gen_dir)
        print(f"fused_moe_90: {kept} objects kept, {dropped} left out, {disabled} fp16-output instantiations off")
    else:
        symbols = load_time_undefined(args.so)
        sys.stdout.write(stubs_source(symbols))
        print(f"fused_moe_90: {len(symbols)} abort stubs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
