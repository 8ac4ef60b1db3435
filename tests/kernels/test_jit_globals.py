"""Triton's compiler (not its CPU interpreter) refuses module globals inside @triton.jit unless they are
`tl.constexpr(...)`. Seen on the H200, 2026-11-29: FP8_MAX = 448.0 passed every interpreter test and then
failed every GPU compile with "Cannot access global variable FP8_MAX". This check runs without a GPU."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

KERNEL_FILES = sorted(p for p in (Path(__file__).resolve().parents[2] / "kernels").glob("*.py"))


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


@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: p.name)
def test_jitted_kernels_only_read_constexpr_globals(path):
    assert non_constexpr_globals(path.read_text()) == []


def test_the_check_catches_a_plain_float_global():
    source = "import triton\nFP8_MAX = 448.0\n@triton.jit\ndef k(x):\n    return x / FP8_MAX\n"
    assert non_constexpr_globals(source) == ["k uses FP8_MAX = 448.0"]
    fixed = source.replace("FP8_MAX = 448.0", "FP8_MAX = tl.constexpr(448.0)")
    assert non_constexpr_globals(fixed) == []
