"""The PTX of our fused-MoE fix-ups keeps the cross-program protocol the kernels rely on (sm_90, Triton 3.7.1).

"The last program to arrive finishes the tile" (ops/fused_moe_fp8_kernels.py `_arrive`) is correct only
if the compiler emits, around the counter atomic:
  1. every thread's partial stores (st.global, generic proxy) → bar.sync → ONE thread's gpu-scope acq_rel
     atom.add (a bar.sync plus one thread's release is the CUTLASS semaphore pattern; every thread adding
     would count 128 arrivals per program);
  2. that thread's result → st.shared → bar.sync → ld.shared in every thread, compared with arrivals − 1,
     so every thread's later loads follow the acquire;
  3. the reset (atom.exch 0) by the same one thread, inside the last program's branch;
  4. the partial loads as ld.global.cg (L2, not a possibly stale L1 line).
The CPU interpreter runs programs one after another and cannot show a race, so a Triton bump that changed
any of this would pass every numerics test; this reads the PTX of real sm_90 compiles (GPU hidden, as in
test_fused_moe_fp8_aot.py) and checks each property, with controls that break each one.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import triton_aot
from tests.conftest_paths import REPO

# Compiles, in a subprocess with the image's Triton (tests/triton_aot.py), the launches that have fix-ups and prints
# {label: {"ptx": ..., "arrivals": n, "fixup_loads_only": bool}}. argv[1]: the Triton version; argv[2] == "relaxed":
# the control.
SCRIPT = """
import json, sys, triton, triton.language as tl
from triton.runtime.driver import driver
from ops import fused_moe_fp8 as F, fused_moe_fp8_aot as A, fused_moe_fp8_kernels as K
from kernels.aot import Sm90Driver
assert triton.__version__ == sys.argv[1], triton.__version__
if len(sys.argv) > 2:
    @triton.jit
    def _arrive(counter_ptr, arrivals: tl.constexpr):
        tl.debug_barrier()
        last = tl.atomic_add(counter_ptr, 1, sem="relaxed") == arrivals - 1
        if last:
            tl.atomic_xchg(counter_ptr, 0)
        return last
    K._arrive = _arrive
driver.set_active(Sm90Driver())
CASE = {c[0]: c for c in A.CASES}
runs = [  # (label, case, config): both fix-ups at 4 and 8 warps, and GEMM1's in SCAN mode
    ("pair-w4", CASE["qwen3-m1-pair-tensor-static"], F.MoEKernelConfig(pair_mode=True, split_k=5, split_k2=2,
                                                                        block_n2=64)),  # 8 × 2 arrivals
    ("pair-w8", CASE["qwen3-m1-pair-tensor-dynamic"], F.MoEKernelConfig(pair_mode=True, split_k=4, split_k2=2,
                                                                         block_n2=64, num_warps=8)),
    ("scan-w4", CASE["qwen3-m64-scan-tensor-dynamic"], F.MoEKernelConfig(pair_mode=False, split_k=2)),
]
out = {}
for label, case, cfg in runs:
    for kernel, grid, args, kw in A.launches(case, cfg):
        name = kernel.fn.__name__
        if name == "moe_sum_kernel" or (name == "moe_gemm2_kernel" and not kw["PAIR_MODE"]):
            continue  # no fix-up
        arrivals = kw["SPLIT"] * (kw["TOPK"] if name == "moe_gemm2_kernel" else 1)
        ptx = kernel.warmup(*args, grid=grid, **kw).asm["ptx"]
        out[f"{label}/{name}"] = {"ptx": ptx, "arrivals": arrivals, "fixup_loads_only": kw["PAIR_MODE"]}
print(json.dumps(out))
"""

_SETP = re.compile(r"setp\.(eq|ne|lt|le|gt|ge)\.[busf]\d+\s+(%p\d+), (%r\d+), (-?\d+);")
_OPS = {"eq": int.__eq__, "ne": int.__ne__, "lt": int.__lt__, "le": int.__le__, "gt": int.__gt__, "ge": int.__ge__}


def _instructions(ptx: str) -> list[str]:
    """PTX lines that are instructions or labels (no comments, .loc lines or inline-asm markers)."""
    out = []
    for line in ptx.splitlines():
        line = line.split("//")[0].strip()
        if line and not line.startswith((".loc", ".file", "{", "}")):
            out.append(line)
    return out


def _definition(lines: list[str], reg: str, before: int) -> str:
    for i in range(before - 1, -1, -1):
        if re.match(rf"[\w.]+\s+{re.escape(reg)},", lines[i]):
            return lines[i]
    raise AssertionError(f"no definition of {reg}")


_BITS = {"and": int.__and__, "or": int.__or__, "xor": int.__xor__, "shr": int.__rshift__, "shl": int.__lshift__}


def _value(lines: list[str], reg: str, before: int, tid: int) -> int | bool:
    """Value of a register derived from %tid.x by mov, bit operations, setp and and.pred: what Triton emits for
    'thread 0' (3.6: tid & 127 == 0; 3.7: (tid & 31) | (tid >> 5) == 0, lane | warp)."""
    d = _definition(lines, reg, before)
    if m := re.fullmatch(rf"mov\.u32\s+{re.escape(reg)}, %tid\.x;", d):
        return tid
    if m := re.fullmatch(rf"(and|or|xor|shr|shl)\.[bu]32\s+{re.escape(reg)}, (%r\d+), (%r\d+|\d+);", d):
        rhs = int(m[3]) if m[3].isdigit() else _value(lines, m[3], before, tid)
        return _BITS[m[1]](_value(lines, m[2], before, tid), rhs)
    if (m := _SETP.fullmatch(d)) and m[2] == reg:
        return _OPS[m[1]](_value(lines, m[3], before, tid), int(m[4]))
    if m := re.fullmatch(rf"and\.pred\s+{re.escape(reg)}, (%p\d+), (%p\d+);", d):
        return _value(lines, m[1], before, tid) and _value(lines, m[2], before, tid)
    raise AssertionError(f"{reg} is not a function of %tid.x this check can evaluate: {d!r}")


def protocol_violations(ptx: str, arrivals: int, fixup_loads_only: bool) -> list[str]:
    """What is wrong with the fix-up protocol in one kernel's PTX (empty: properties 1-4 of the docstring hold)."""
    lines = _instructions(ptx)
    bad: list[str] = []
    threads = int(re.search(r"\.reqntid (\d+)", ptx)[1])
    atoms = [i for i, s in enumerate(lines) if re.search(r"\b(atom|red)\.", s)]
    adds = [i for i in atoms if ".add." in lines[i]]
    exchs = [i for i in atoms if ".exch." in lines[i]]
    if len(adds) != 1 or len(exchs) != 1 or len(atoms) != 2:
        return [f"want one atom add and one atom exch, got {[lines[i] for i in atoms]}"]
    a, e = adds[0], exchs[0]
    m = re.fullmatch(
        r"(?:@(%p\d+) )?atom\.global\.gpu\.acq_rel\.add\.u32 (%r\d+), \[ (%rd\d+) \+ 0 \], %r\d+;", lines[a]
    )
    if not m:
        return [f"the arrival is not a predicated gpu-scope acq_rel atom.global add: {lines[a]!r}"]
    pred, result, addr = m.groups()
    if pred is None:
        bad.append(f"every one of the {threads} threads executes the arrival add: {lines[a]!r}")
    else:
        doers = [t for t in range(threads) if _value(lines, pred, a, t)]
        if doers != [0]:
            bad.append(f"the arrival add runs in threads {doers[:8]}… of {threads}, not in thread 0 alone")
    stores = [i for i in range(a) if re.search(r"\bst\.global", lines[i])]
    bar = max((i for i in range(a) if re.fullmatch(r"bar\.sync\s+0;", lines[i])), default=-1)
    if not stores or bar < stores[-1]:
        bad.append("no bar.sync between the partial stores (st.global) and the arrival add")
    elif any(s.endswith(":") or "bra" in s for s in lines[bar + 1 : a]):
        bad.append("a branch or label between the bar.sync and the arrival add: a path may skip the barrier")
    if any(re.search(r"cp\.async\.bulk\S*\.global\.shared|st\.async", s) for s in lines[:a]):
        bad.append("an async-proxy (TMA) global store before the arrival: the generic-proxy release does not cover it")
    # broadcast: @p st.shared result; bar.sync; ld.shared r; setp.ne p2, r, arrivals-1; @p2 bra
    tail = lines[a + 1 : e]
    want = [
        rf"@{re.escape(pred or '')} st\.shared\.b32 \[ %r\d+ \+ 0 \], {re.escape(result)};",
        r"bar\.sync\s+0;",
        r"ld\.shared\.b32\s+(%r\d+), \[global_smem\];",
    ]
    pos, seen = 0, []
    for pattern in want:
        while pos < len(tail) and not re.fullmatch(pattern, tail[pos]):
            if "bra" in tail[pos]:
                break
            pos += 1
        if pos == len(tail) or "bra" in tail[pos]:
            bad.append(f"the arrival count is not broadcast through shared memory behind a barrier (missing {pattern})")
            break
        seen.append(tail[pos])
        pos += 1
    else:
        bcast = re.fullmatch(want[2], seen[2])[1]
        cmp = next((s for s in tail[pos:] if bcast in s and s.startswith("setp")), "")
        if not re.fullmatch(rf"setp\.(ne|eq)\.b32\s+%p\d+, {re.escape(bcast)}, {arrivals - 1};", cmp):
            bad.append(f"the broadcast count is not compared with arrivals-1 = {arrivals - 1}: {cmp!r}")
    if not re.fullmatch(
        rf"@{re.escape(pred or '')} atom\.global\.gpu\.acq_rel\.exch\.b32 %r\d+, \[ {re.escape(addr)} \+ 0 \], %r\d+;",
        lines[e],
    ):
        bad.append(f"the reset is not the same thread's exch on the same counter: {lines[e]!r}")
    if not any("bra" in s for s in tail):
        bad.append("the reset is not inside the last program's branch")
    loads = [s for s in lines[e + 1 :] if re.search(r"\bld\.global", s)]
    if not any("ld.global.cg" in s for s in loads):
        bad.append("the last program's partial loads are not ld.global.cg")
    if fixup_loads_only and any("ld.global.cg" not in s for s in loads):
        bad.append(f"a fix-up load that may hit L1: {[s for s in loads if 'ld.global.cg' not in s][:2]}")
    return bad


def _compile(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    """SCRIPT under Triton 3.7.1 with the GPU hidden and TRITON_INTERPRET unset (as test_fused_moe_fp8_aot.py)."""
    env = triton_aot.env(tmp_path)
    script = tmp_path / "dump_ptx.py"  # a file: @triton.jit reads the source of the control's kernel
    script.write_text(SCRIPT)
    return subprocess.run(
        [sys.executable, str(script), triton_aot.TRITON_VERSION, *extra],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict[str, dict]:
    proc = _compile(tmp_path_factory.mktemp("ptx"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_fixup_keeps_the_protocol(compiled):
    assert sorted(compiled) == [
        "pair-w4/moe_gemm1_kernel",
        "pair-w4/moe_gemm2_kernel",
        "pair-w8/moe_gemm1_kernel",
        "pair-w8/moe_gemm2_kernel",
        "scan-w4/moe_gemm1_kernel",
    ]
    problems = {k: protocol_violations(v["ptx"], v["arrivals"], v["fixup_loads_only"]) for k, v in compiled.items()}
    assert problems == {k: [] for k in compiled}


def _drop_barrier_before_add(ptx: str) -> str:
    head, sep, rest = ptx.partition("atom.global.gpu.acq_rel.add")
    i = head.rindex("bar.sync")
    return head[:i] + "// dropped" + head[head.index("\n", i) :] + sep + rest


MUTATIONS = {  # id: (edit of the PTX text, what the checker must then say)
    "all-threads-add": (lambda p: re.sub(r"@%p\d+ (atom\.global\.gpu\.acq_rel\.add)", r"\1", p), "every one of the"),
    "two-threads-add": (
        lambda p: re.sub(r"setp\.eq\.b32(\s+%p\d+, %r\d+), 0;(\s+mov\.b32\s+%r\d+, 1;)", r"setp.lt.u32\1, 2;\2", p),
        "threads [0, 1]",
    ),
    "no-barrier": (_drop_barrier_before_add, "no bar.sync"),
    "l1-loads": (lambda p: p.replace("ld.global.cg", "ld.global"), "not ld.global.cg"),
    "other-counter-reset": (
        lambda p: re.sub(r"(atom\.global\.gpu\.acq_rel\.exch\.b32 %r\d+, \[ )%rd\d+", r"\1%rd0", p),
        "reset is not",
    ),
    "wrong-count": (lambda p: re.sub(r"(setp\.ne\.b32\s+%p\d+, %r\d+, )15;", r"\g<1>14;", p), "arrivals-1 = 15"),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_the_checker_catches_each_broken_property(compiled, name):
    """Controls on real PTX (GEMM2's top-k fix-up, 8 × 2 = 16 arrivals): each edit breaks one property and
    the checker names it."""
    edit, message = MUTATIONS[name]
    v = compiled["pair-w4/moe_gemm2_kernel"]
    ptx = edit(v["ptx"])
    assert ptx != v["ptx"], f"the mutation {name} changed nothing: the control would test nothing"
    problems = protocol_violations(ptx, v["arrivals"], v["fixup_loads_only"])
    assert any(message in p for p in problems), problems


def test_the_checker_follows_tritons_lane_and_warp_form_of_thread_zero(compiled):
    """Triton 3.7 selects thread 0 of 8 warps as (tid & 31) | (tid >> 5) == 0: a warp shift of 6 lets thread 32
    add too, and the checker must see it."""
    v = compiled["pair-w8/moe_gemm1_kernel"]
    ptx = re.sub(r"(shr\.u32\s+%r\d+, %r\d+, )5;", r"\g<1>6;", v["ptx"])
    assert ptx != v["ptx"], "no warp shift in the PTX: the control would test nothing"
    problems = protocol_violations(ptx, v["arrivals"], v["fixup_loads_only"])
    assert any("threads [0, 32]" in p for p in problems), problems


def test_a_relaxed_arrival_is_caught(tmp_path):
    """Control with a real compile: the same kernels with sem="relaxed" on the arrival add fail the check."""
    proc = _compile(tmp_path, "relaxed")
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    v = result["pair-w4/moe_gemm1_kernel"]
    problems = protocol_violations(v["ptx"], v["arrivals"], v["fixup_loads_only"])
    assert any("acq_rel atom.global add" in p for p in problems), problems
