"""Our fused-MoE kernels compile for sm_90 with the H200's Triton (3.7.1), on a machine with no GPU.

The CPU interpreter runs the numerics tests but accepts code the compiler refuses; this runs every
launch of ops/fused_moe_fp8_aot.py's cases through Triton 3.7.1's real compiler (target cuda:90,
GPU hidden) in a subprocess: TRITON_INTERPRET must be unset there, and build/triton-3.7.1 (made by
`make triton-aot-env`) must shadow .venv's Triton (tests/triton_aot.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests import triton_aot
from tests.conftest_paths import REPO

SCRIPT = """
import json, sys, triton
from ops import fused_moe_fp8_aot as A
assert triton.__version__ == sys.argv[1], triton.__version__
if len(sys.argv) > 2:  # the control: a kernel the compiler must refuse
    import triton.language as tl
    from ops import fp8_quant as Q
    Q.FP8_MAX = 448.0  # a plain float global: the interpreter accepts it, the compiler does not
print(json.dumps(A.compile_all()))
"""


def _compile(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, triton_aot.TRITON_VERSION, *extra], env=triton_aot.env(tmp_path), cwd=REPO,
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def _script_json(tmp_path: Path, script: str) -> dict:
    """Run `script` under Triton 3.7.1 (tests/triton_aot.py) and parse the JSON of its last output line."""
    proc = subprocess.run([sys.executable, "-c", script], env=triton_aot.env(tmp_path), cwd=REPO, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_launch_compiles_for_sm90(tmp_path):
    from ops.fused_moe_fp8_aot import ATOMIC, CASES, FOLDED, FOLDED_PDL_GEMM1

    proc = _compile(tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    # PAIR cases launch 2 kernels, SCAN cases 3; folded, PAIR still 2 (routing inside), SCAN 4 (moe_route_kernel)
    pair = {c[0]: c[1] == 1 for c in CASES}
    folded = sum(2 if pair[name] else 4 for name, *_ in FOLDED)
    pdl1 = 2 * len(FOLDED_PDL_GEMM1)  # PAIR cases only
    assert result["launches"] == sum(2 if c[1] == 1 else 3 for c in CASES) + folded + 2 * len(ATOMIC) + pdl1


def test_the_compile_check_catches_what_the_interpreter_accepts(tmp_path):
    proc = _compile(tmp_path, "break")
    assert proc.returncode != 0
    assert "FP8_MAX" in proc.stderr


DIVISION_SCRIPT = """
import json, re
from triton.runtime.driver import driver
from ops import fused_moe_fp8_aot as A
from kernels.aot import Sm90Driver
driver.set_active(Sm90Driver())
found = {}
for name in ("qwen3-m1-pair-tensor-dynamic", "dsv3-m1-pair-block-dynamic", "qwen3-m64-scan-tensor-dynamic"):
    case = next(c for c in A.CASES if c[0] == name)
    kernel, grid, args, kwargs = A.launches(case)[1]  # GEMM2: quantises act, no SiLU (whose `/` may be fast)
    ptx = kernel.warmup(*args, grid=grid, **kwargs).asm["ptx"]
    found[name] = dict(div=sorted(set(re.findall(r"\\b(div\\.[a-z0-9.]+)", ptx))), fma=ptx.count("fma.rn.f32"))
print(json.dumps(found))
"""


def test_quantisation_uses_the_correction_step_not_a_division_subroutine_on_sm90(tmp_path):
    """ops/fp8_quant.py: x / scale is an approximate reciprocal plus fused-multiply-add corrections (exact,
    tests/ops/test_fp8_quant.py), never tl.div_rn (a subroutine per element: 2-3× slower kernels on the H200)."""
    for name, seen in _script_json(tmp_path, DIVISION_SCRIPT).items():
        assert not any(d.startswith("div.rn.") for d in seen["div"]) and seen["fma"] > 0, f"{name}: {seen}"


PDL_SCRIPT = """
import json
from triton.runtime.driver import driver
from ops import fused_moe_fp8_aot as A
from ops.fused_moe_fp8 import MoEKernelConfig
from kernels.aot import Sm90Driver
driver.set_active(Sm90Driver())
case = next(c for c in A.CASES if c[0] == "qwen3-m1-pair-tensor-dynamic")
found = {}
for label, pdl, pdl1 in (("True", True, False), ("False", False, False), ("pdl1", True, True)):
    cfg = MoEKernelConfig(pair_mode=True, block_n1=32, block_n2=32, split_k=4, split_k2=2, pdl=pdl, pdl_gemm1=pdl1)
    for name, (kernel, grid, args, kwargs) in zip(("gemm1", "gemm2"), A.launches(case, cfg), strict=True):
        ptx = kernel.warmup(*args, grid=grid, **kwargs).asm["ptx"]
        marks = ("griddepcontrol.launch_dependents", "prefetch.global.L2", "griddepcontrol.wait", "ld.global")
        found[f"{name}/{label}"] = dict(launch_pdl=bool(kwargs.get("launch_pdl")), at={m: ptx.find(m) for m in marks})
print(json.dumps(found))
"""


def test_gemm2_prefetches_then_waits_under_pdl_and_not_without(tmp_path):
    """PDL (ops/fused_moe_fp8_kernels.py): GEMM1 lets GEMM2 launch early; GEMM2 is launched with launch_pdl,
    prefetches its W2 slice, and waits for GEMM1 before anything else; pdl=False compiles none of it."""
    found = _script_json(tmp_path, PDL_SCRIPT)
    g1, g2 = found["gemm1/True"], found["gemm2/True"]
    assert g1["at"]["griddepcontrol.launch_dependents"] >= 0 and not g1["launch_pdl"]
    assert g2["launch_pdl"] and 0 <= g2["at"]["prefetch.global.L2"] < g2["at"]["griddepcontrol.wait"]
    assert g1["at"]["griddepcontrol.wait"] == -1  # GEMM1 waits for nothing unless pdl_gemm1
    for name in ("gemm1/False", "gemm2/False"):
        found[name]["at"].pop("ld.global")
        assert not found[name]["launch_pdl"] and set(found[name]["at"].values()) == {-1}, found[name]


def test_gemm1_under_pdl_waits_before_its_first_load_and_before_letting_gemm2_launch(tmp_path):
    """pdl_gemm1 (issue 33 step 3): GEMM1 is launched with launch_pdl behind the router or top-k kernel, so nothing
    that kernel writes may be read before griddepcontrol.wait; and GEMM2, which reads the routing before its own
    wait, may launch only after it (launch_dependents after the wait)."""
    g1 = _script_json(tmp_path, PDL_SCRIPT)["gemm1/pdl1"]
    at = g1["at"]
    assert g1["launch_pdl"] and 0 <= at["griddepcontrol.wait"] < at["griddepcontrol.launch_dependents"], g1
    assert at["griddepcontrol.wait"] < at["ld.global"], g1


def test_the_bake_covers_every_m_the_dispatch_table_sends_to_our_kernel_as_the_plugin_calls_it():
    import torch

    from kernels.dispatch import DispatchTable
    from ops import fused_moe_fp8_aot as A

    table = DispatchTable.load()
    cases = A.table_cases(table)
    assert len(cases) == sum(hi - lo + 1 for row in table.rows.values() for lo, hi in row.token_ranges)
    by_shape: dict[str, set[int]] = {}
    for name, m, e, k, h, inter, scales, static, gated, dtype in cases:
        by_shape.setdefault(name.rsplit("-m", 1)[0], set()).add(m)
        assert dtype == torch.bfloat16  # the served dtype; the plugin passes vLLM's bf16 activations
        if name.startswith("deepseek-v3:tp8"):
            assert (e, k, h, inter, scales, static, gated) == (256, 8, 7168, 256, "block", False, True)
        if name.startswith("nemotron"):
            assert not gated and scales == "tensor" and static  # relu², per-tensor static
    assert by_shape["qwen3-30b-a3b:tp1"] == {1}
    assert A.table_cases(table, {"qwen3-30b-a3b:tp1"}) == [c for c in cases if c[0].startswith("qwen3-30b-a3b:tp1")]
