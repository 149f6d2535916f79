"""Reading vLLM's own tests by their AST: which test does what, in order.

A patch that adds a regression test is in place when some test of the tree
does what that test does, whatever its name or file (an upstream version of
the test counts; a file that only names the code does not). The fixes'
test readers (their ``series`` modules) share these helpers.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

from vllm_overlay.code import Code, Shape
from vllm_overlay.tree_files import read_regular

ATTENTION_TESTS = Path("tests/v1/attention")
"""Where vLLM keeps the attention builders' tests."""
MAX_TEST_BYTES = 2_000_000
"""A test module past this is not read (vLLM's largest is a tenth of it)."""


def find_test(tree: Path, line_of: Callable[[str], int | None], absent: str) -> Code:
    """FIXED at the first test under :data:`ATTENTION_TESTS` for whose
    source ``line_of`` gives a line; else BUGGY (the tree lacks it), saying
    ``absent``. Only regular files are read (:mod:`vllm_overlay.tree_files`)."""
    for path in sorted((tree / ATTENTION_TESTS).glob("test_*.py")):
        try:
            source = read_regular(path, MAX_TEST_BYTES)
        except OSError:
            continue  # a directory, a FIFO, unreadable: it holds no test
        line = line_of(source.decode(errors="replace"))
        if line is not None:
            return Code(Shape.FIXED, path, line, f"{path.relative_to(tree)} tests it")
    return Code(Shape.BUGGY, tree / ATTENTION_TESTS, None, absent)


Function = ast.FunctionDef | ast.AsyncFunctionDef


def test_functions(module: ast.Module) -> list[Function]:
    """Module-level ``test*`` functions and ``test*`` methods of ``Test*`` classes."""
    found: list[Function] = []
    for node in module.body:
        if isinstance(node, Function) and node.name.startswith("test"):
            found.append(node)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            found += [
                item
                for item in node.body
                if isinstance(item, Function) and item.name.startswith("test")
            ]
    return found


def calls(node: ast.AST, name: str) -> bool:
    """A call of ``name(...)`` or ``<anything>.name(...)``."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == name) or (
        isinstance(func, ast.Attribute) and func.attr == name
    )


def asserted(node: ast.AST) -> list[ast.expr]:
    """What an ``assert``, or an ``assert*(...)`` call statement, checks
    (nothing for any other node)."""
    if isinstance(node, ast.Assert):
        return [node.test]
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        call = node.value
        func = call.func
        called = (
            func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        )
        if called.startswith("assert"):
            return [*call.args, *(k.value for k in call.keywords)]
    return []


def asserts_on(node: ast.AST, field: str) -> bool:
    """An assertion (:func:`asserted`) reading ``field``."""
    return any(
        isinstance(n, ast.Attribute) and n.attr == field
        for expr in asserted(node)
        for n in ast.walk(expr)
    )
