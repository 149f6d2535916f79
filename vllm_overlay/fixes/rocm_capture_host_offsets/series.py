"""#51585's patches read on a source tree: 0001 (the fix) and 0002 (its test).

0001 is carried where the ROCm capture zeroes both offsets and holds once
it zeroes the device ones only (:mod:`.code`); 0002 is carried wherever
that capture zeroes the offsets, and holds once a vLLM test captures with
the ROCm builder and then asserts on the host offsets.
"""

from __future__ import annotations

import ast
from pathlib import Path

from vllm_overlay.code import Code, reads
from vllm_overlay.fixes.rocm_capture_host_offsets.code import (
    BUILDER_CLASS,
    CAPTURE_METHOD,
    HOST_OFFSETS,
    ROCM_ATTN,
    inspect_capture_tree,
)
from vllm_overlay.patch_rules import Cache, PatchRule, fix_patch, test_patch
from vllm_overlay.vllm_tests import (
    ATTENTION_TESTS,
    Function,
    asserted,
    find_test,
    test_functions,
)


@reads(ROCM_ATTN)
def capture(tree: Path, cache: Cache) -> Code:
    """0001's reading: the capture method's shape."""
    return inspect_capture_tree(tree)


def regression_test_present(tree: Path, cache: Cache) -> Code:
    """0002: a vLLM test captures with the ROCm builder, then checks host offsets.

    Judged by what a test does, not by the names it mentions (any module
    under tests/v1/attention, so an edited upstream version counts): it calls
    ``build_for_cudagraph_capture`` on a RocmAttentionMetadataBuilder and, in
    a later statement, asserts (``assert``, or an ``assert*`` call) on
    ``query_start_loc_cpu``, directly, through a name bound to it, or through
    a value computed from it after the capture (a copy taken before does not
    count).
    """
    return find_test(
        tree,
        _regression_test_line,
        f"no test in {ATTENTION_TESTS} captures with {BUILDER_CLASS} and then "
        f"asserts on {HOST_OFFSETS}",
    )


def _regression_test_line(source: str) -> int | None:
    """The line of a test that captures, then asserts on the host offsets."""
    if BUILDER_CLASS not in source or CAPTURE_METHOD not in source:
        return None
    try:
        module = ast.parse(source)
    except SyntaxError:
        return None
    factories = _builder_factories(module)
    for test in test_functions(module):
        if _CaptureCheck(test, factories).holds():
            return test.lineno
    return None


def _names_builder(node: ast.expr | None) -> bool:
    """``RocmAttentionMetadataBuilder`` or ``module.RocmAttentionMetadataBuilder``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value == BUILDER_CLASS  # a string annotation
    return (isinstance(node, ast.Name) and node.id == BUILDER_CLASS) or (
        isinstance(node, ast.Attribute) and node.attr == BUILDER_CLASS
    )


def _builder_factories(module: ast.Module) -> set[str]:
    """Module-level functions (helpers or fixtures) that give a ROCm builder:
    annotated to return one, or returning a constructor call of one."""
    functions = {n.name: n for n in module.body if isinstance(n, Function)}
    factories: set[str] = set()
    changed = True
    while changed:  # a factory may call another factory
        changed = False
        for name, function in functions.items():
            if name in factories:
                continue
            returns = [
                n.value
                for n in ast.walk(function)
                if isinstance(n, ast.Return | ast.Yield) and n.value is not None
            ]
            if _names_builder(function.returns) or any(
                _is_builder(value, set(), factories) for value in returns
            ):
                factories.add(name)
                changed = True
    return factories


def _is_builder(node: ast.expr, builders: set[str], factories: set[str]) -> bool:
    """Whether ``node`` evaluates to a RocmAttentionMetadataBuilder."""
    if isinstance(node, ast.Name):
        return node.id in builders
    if isinstance(node, ast.Call):
        func = node.func
        if _names_builder(func):
            return True
        return isinstance(func, ast.Name) and func.id in factories
    return False


class _CaptureCheck:
    """Walk one test's statements in order: capture first, then an assertion."""

    def __init__(self, test: Function, factories: set[str]) -> None:
        self.test = test
        self.factories = factories
        self.builders: set[str] = set()
        self.host_names: set[str] = set()  # names bound to the host offsets
        self.captured = False
        self.checked = False
        args = test.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            # A fixture that gives a builder, or a parameter annotated as one.
            if arg.arg in factories or _names_builder(arg.annotation):
                self.builders.add(arg.arg)

    def holds(self) -> bool:
        self._block(self.test.body)
        return self.checked

    def _block(self, statements: list[ast.stmt]) -> None:
        for statement in statements:
            if self.checked:
                return
            self._statement(statement)

    def _statement(self, node: ast.stmt) -> None:
        if isinstance(node, Function | ast.ClassDef):
            return  # a nested definition runs only when called
        if self.captured and self._asserts_host_offsets(node):
            self.checked = True
            return
        # Compound statements: their own expressions, then their bodies.
        nested = [
            getattr(node, field, [])
            for field in ("body", "orelse", "finalbody", "handlers", "cases")
        ]
        own = [
            child
            for child in ast.iter_child_nodes(node)
            if not isinstance(child, ast.stmt | ast.excepthandler | ast.match_case)
        ]
        for child in own:
            self._note_capture(child)
        self._note_bindings(node)
        for block in nested:
            for item in block:
                if isinstance(item, ast.stmt):
                    self._statement(item)
                else:  # except handlers, match cases
                    self._block(item.body)

    def _note_capture(self, node: ast.AST) -> None:
        for call in ast.walk(node):
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == CAPTURE_METHOD
                and _is_builder(call.func.value, self.builders, self.factories)
            ):
                self.captured = True

    def _note_bindings(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
            if _names_builder(node.annotation) and isinstance(node.target, ast.Name):
                self.builders.add(node.target.id)
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                if isinstance(item.optional_vars, ast.Name):
                    self._bind([item.optional_vars], item.context_expr)
            return
        else:
            return
        self._bind(targets, value)

    def _bind(self, targets: list[ast.expr], value: ast.expr) -> None:
        names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        if _is_builder(value, self.builders, self.factories):
            self.builders.update(names)
        # The host offsets themselves at any time (an alias sees what the
        # capture does to them), or anything computed from them after it; a
        # copy taken before the capture checks nothing about the capture.
        alias = (isinstance(value, ast.Attribute) and value.attr == HOST_OFFSETS) or (
            isinstance(value, ast.Name) and value.id in self.host_names
        )
        if alias or (self.captured and self._reads_host_offsets(value)):
            self.host_names.update(names)
        else:
            self.host_names.difference_update(names)

    def _reads_host_offsets(self, node: ast.AST) -> bool:
        return any(
            (isinstance(n, ast.Attribute) and n.attr == HOST_OFFSETS)
            or (isinstance(n, ast.Name) and n.id in self.host_names)
            for n in ast.walk(node)
        )

    def _asserts_host_offsets(self, node: ast.stmt) -> bool:
        return any(self._reads_host_offsets(expr) for expr in asserted(node))


RULES: tuple[PatchRule, ...] = (
    fix_patch("rocm-capture-zeroes-device-offsets-only", capture),
    test_patch(
        "rocm-capture-regression-test-present", capture, regression_test_present
    ),
)
