"""Triton's compiler (not its CPU interpreter) refuses module globals inside @triton.jit unless they are
`tl.constexpr(...)`. Seen on the H200, 2026-11-29: FP8_MAX = 448.0 passed every interpreter test and then
failed every GPU compile with "Cannot access global variable FP8_MAX". This check runs without a GPU."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Every module of the repository that defines a @triton.jit function outside the tests (our kernels in ops/, the
# device diagnostics), found by content so a moved or new kernel file is checked without editing this list.
KERNEL_FILES = sorted(
    p
    for folder in ("ops", "kernels", "benchmarks", "tools")
    for p in (REPO / folder).rglob("*.py")
    if "@triton.jit" in p.read_text()
)


def _is_jit(node: ast.FunctionDef) -> bool:
    return any("jit" in ast.unparse(d) for d in node.decorator_list)


def _module_constants(tree: ast.Module) -> dict[str, ast.expr]:
    found = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            found[stmt.targets[0].id] = stmt.value
    return found


def non_constexpr_globals(source: str) -> list[str]:
    tree = ast.parse(source)
    constants = _module_constants(tree)
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and _is_jit(node):
            local = {a.arg for a in node.args.args}
            body_names = (n for stmt in node.body for n in ast.walk(stmt))  # decorators run on the host
            for inner in body_names:
                if isinstance(inner, ast.Name) and inner.id in constants and inner.id not in local:
                    value = constants[inner.id]
                    if isinstance(value, ast.Constant | ast.UnaryOp | ast.BinOp | ast.Tuple):
                        bad.append(f"{node.name} uses {inner.id} = {ast.unparse(value)}")
    return sorted(set(bad))


def test_the_kernel_files_are_found():
    """An empty KERNEL_FILES (kernels moved, the search missed them) would pass the check below by checking nothing."""
    found = {str(p.relative_to(REPO)) for p in KERNEL_FILES}
    assert {"ops/fp8_quant.py", "ops/fused_moe_fp8_kernels.py", "ops/moe_routing.py", "ops/rope_fp8.py"} <= found


@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_jitted_kernels_only_read_constexpr_globals(path):
    assert non_constexpr_globals(path.read_text()) == []


def test_the_check_catches_a_plain_float_global():
    source = "import triton\nFP8_MAX = 448.0\n@triton.jit\ndef k(x):\n    return x / FP8_MAX\n"
    assert non_constexpr_globals(source) == ["k uses FP8_MAX = 448.0"]
    fixed = source.replace("FP8_MAX = 448.0", "FP8_MAX = tl.constexpr(448.0)")
    assert non_constexpr_globals(fixed) == []
