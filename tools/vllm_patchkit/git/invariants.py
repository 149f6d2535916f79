"""Invariants: what a vLLM source tree must look like once a patch is in.

A textual patch can apply with fuzz and land in the wrong place, or apply
cleanly to code that already has the fix. An invariant reads the code
itself (its AST; nothing is imported) and answers one question per patch,
so the same check verifies an application, detects that upstream carries
the fix, and tells whether a tree is affected.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vllm_overlay.code import Shape
from vllm_overlay.fixes.rocm_aiter_unified_builder.code import (
    BACKEND_CLASS,
    inspect_aiter_tree,
)
from vllm_overlay.fixes.rocm_capture_host_offsets.code import (
    BUILDER_CLASS,
    CAPTURE_METHOD,
    HOST_OFFSETS,
    inspect_capture_tree,
)
from vllm_overlay.fixes.static_sink_seq_lens import FACTORY, inspect_static_sink_tree


@dataclass(frozen=True)
class InvariantResult:
    name: str
    holds: bool
    detail: str
    file: Path
    line: int | None


def rocm_capture_zeroes_device_offsets_only(tree: Path) -> InvariantResult:
    """0001: device offsets zeroed in place, host offsets not touched."""
    code = inspect_capture_tree(tree)
    return InvariantResult(
        name="rocm-capture-zeroes-device-offsets-only",
        holds=code.shape is Shape.FIXED,
        detail=code.detail,
        file=code.file,
        line=code.line,
    )


ATTENTION_TESTS = Path("tests/v1/attention")


def rocm_capture_regression_test_present(tree: Path) -> InvariantResult:
    """0002: a vLLM test captures with the ROCm builder, then checks host offsets.

    Judged by what a test does, not by the names it mentions: a test
    function calls ``build_for_cudagraph_capture`` on a
    RocmAttentionMetadataBuilder and, in a later statement, asserts on
    ``query_start_loc_cpu`` (an ``assert``, or an ``assert*`` call such as
    ``torch.testing.assert_close``, whose expression reads it, directly, through
    a name bound to it, or through a value computed from it after the capture;
    a copy taken before the capture does not count). Any module under
    tests/v1/attention counts, whatever its name, so an edited upstream
    version of 0002's test is recognised as upstreamed, and a file that only
    names both is not.
    """
    name = "rocm-capture-regression-test-present"
    for path in sorted((tree / ATTENTION_TESTS).glob("test_*.py")):
        line = _regression_test_line(path)
        if line is not None:
            where = path.relative_to(tree)
            return InvariantResult(name, True, f"{where} tests it", path, line)
    return InvariantResult(
        name,
        False,
        f"no test in {ATTENTION_TESTS} captures with {BUILDER_CLASS} and then asserts "
        f"on {HOST_OFFSETS}",
        tree / ATTENTION_TESTS,
        None,
    )


def _regression_test_line(path: Path) -> int | None:
    """The line of a test that captures, then asserts on the host offsets."""
    source = path.read_text(errors="replace")
    if BUILDER_CLASS not in source or CAPTURE_METHOD not in source:
        return None
    try:
        module = ast.parse(source)
    except SyntaxError:
        return None
    factories = _builder_factories(module)
    for test in _test_functions(module):
        if _CaptureCheck(test, factories).holds():
            return test.lineno
    return None


_Function = ast.FunctionDef | ast.AsyncFunctionDef


def _test_functions(module: ast.Module) -> list[_Function]:
    """Module-level ``test*`` functions and ``test*`` methods of ``Test*`` classes."""
    found: list[_Function] = []
    for node in module.body:
        if isinstance(node, _Function) and node.name.startswith("test"):
            found.append(node)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            found += [
                item
                for item in node.body
                if isinstance(item, _Function) and item.name.startswith("test")
            ]
    return found


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
    functions = {n.name: n for n in module.body if isinstance(n, _Function)}
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

    def __init__(self, test: _Function, factories: set[str]) -> None:
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
        if isinstance(node, _Function | ast.ClassDef):
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
        if isinstance(node, ast.Assert):
            return self._reads_host_offsets(node.test)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            func = call.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else getattr(func, "id", "")
            )
            if name.startswith("assert"):
                arguments = [*call.args, *(k.value for k in call.keywords)]
                return any(self._reads_host_offsets(a) for a in arguments)
        return False


def rocm_aiter_unified_capture_keeps_offsets(tree: Path) -> InvariantResult:
    """0003: AITER unified's capture keeps both offsets; ROCM_ATTN's is 0001's.

    ``RocmAiterUnifiedAttentionBackend.get_builder_cls`` must hand out a
    builder of the module's own whose ``build_for_cudagraph_capture`` provably
    writes neither offsets tensor (FIXED, by
    :mod:`vllm_overlay.fixes.rocm_aiter_unified_builder.code`: the one analysis
    of metadata writes, aliases followed, which
    also refuses a capture that hands the metadata on to the ROCm builder's)
    and fills ``seq_lens`` with 1. The ROCm builder itself must still zero
    the device offsets in place and leave the host ones (0001's shape).
    Upstream's builder (0.29.0+) has this shape, whatever its name, so the
    patch is then reported as upstreamed.
    """
    name = "rocm-aiter-unified-capture-keeps-offsets"
    aiter = inspect_aiter_tree(tree)
    file = aiter.file
    if aiter.shape is Shape.BUGGY:
        why = f"{BACKEND_CLASS} hands out {BUILDER_CLASS}, whose capture zeroes"
        return InvariantResult(
            name, False, f"{why} the device offsets", file, aiter.line
        )
    capture = aiter.method
    if aiter.shape is not Shape.FIXED or capture is None:
        return InvariantResult(name, False, aiter.detail, file, aiter.line)
    if not any(_fills_seq_lens_with_one(n) for n in ast.walk(capture)):
        why = f"{CAPTURE_METHOD} does not fill seq_lens with 1"
        return InvariantResult(name, False, why, file, capture.lineno)
    rocm = inspect_capture_tree(tree)
    if rocm.shape is not Shape.FIXED:
        return InvariantResult(
            name, False, f"ROCM_ATTN: {rocm.detail}", rocm.file, rocm.line
        )
    return InvariantResult(
        name,
        True,
        f"{aiter.builder}.{CAPTURE_METHOD} keeps both query offsets; ROCM_ATTN "
        "zeroes the device offsets only",
        file,
        capture.lineno,
    )


def _fills_seq_lens_with_one(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "fill_"
        and isinstance(node.func.value, ast.Attribute)
        and node.func.value.attr == "seq_lens"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == 1
    )


def static_sink_keeps_shared_seq_lens(tree: Path) -> InvariantResult:
    """0004: ``StaticSinkAttentionBuilder.build`` has the fixed shape (it
    works on a copy of the metadata and its own seq_lens buffer), as the
    overlay's fix module judges it."""
    code = inspect_static_sink_tree(tree)
    return InvariantResult(
        name="static-sink-keeps-shared-seq-lens",
        holds=code.shape is Shape.FIXED,
        detail=code.detail,
        file=code.file,
        line=code.line,
    )


def static_sink_regression_test_present(tree: Path) -> InvariantResult:
    """0005: a vLLM test makes a static-sink backend, builds metadata with
    it, and then asserts on ``seq_lens``.

    Judged by what a test function does, in the order of its lines: a call
    of ``create_static_sink_attention_backend`` (or of a module-level helper
    that calls it), a later ``.build(...)``
    call, and after that an ``assert`` (or an ``assert*`` call) whose
    expression reads a ``seq_lens``. Any module under tests/v1/attention
    counts, whatever its name, so an upstream version of 0005's test is
    recognised; a file that only names the factory is not.
    """
    name = "static-sink-regression-test-present"
    for path in sorted((tree / ATTENTION_TESTS).glob("test_*.py")):
        line = _sink_test_line(path)
        if line is not None:
            where = path.relative_to(tree)
            return InvariantResult(name, True, f"{where} tests it", path, line)
    return InvariantResult(
        name,
        False,
        f"no test in {ATTENTION_TESTS} builds with {FACTORY}'s builder and "
        "then asserts on seq_lens",
        tree / ATTENTION_TESTS,
        None,
    )


def _sink_test_line(path: Path) -> int | None:
    """The line of a test that makes a static-sink backend, builds, then
    asserts on seq_lens."""
    source = path.read_text(errors="replace")
    if FACTORY not in source:
        return None
    try:
        module = ast.parse(source)
    except SyntaxError:
        return None
    # A module-level helper that calls the factory makes the backend for
    # the test that calls it (vLLM's tests often build through helpers).
    makers = {FACTORY} | {
        node.name
        for node in module.body
        if isinstance(node, ast.FunctionDef)
        and any(_calls(c, FACTORY) for c in ast.walk(node))
    }
    for test in _test_functions(module):
        nodes = list(ast.walk(test))
        made = [c.lineno for c in nodes if any(_calls(c, m) for m in makers)]
        if not made:
            continue
        built = [c.lineno for c in nodes if _calls(c, "build") and c.lineno > min(made)]
        if built and any(
            _asserts_on(n, "seq_lens") and n.lineno > min(built) for n in nodes
        ):
            return test.lineno
    return None


def _calls(node: ast.AST, name: str) -> bool:
    """A call of ``name(...)`` or ``<anything>.name(...)``."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == name) or (
        isinstance(func, ast.Attribute) and func.attr == name
    )


def _asserts_on(node: ast.AST, field: str) -> bool:
    """An ``assert``, or an ``assert*(...)`` call statement, reading ``field``."""
    if isinstance(node, ast.Assert):
        checked: list[ast.expr] = [node.test]
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        call = node.value
        func = call.func
        called = (
            func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        )
        if not called.startswith("assert"):
            return False
        checked = [*call.args, *(k.value for k in call.keywords)]
    else:
        return False
    return any(
        isinstance(n, ast.Attribute) and n.attr == field
        for expr in checked
        for n in ast.walk(expr)
    )


INVARIANTS: dict[str, Callable[[Path], InvariantResult]] = {
    "rocm-capture-zeroes-device-offsets-only": rocm_capture_zeroes_device_offsets_only,
    "rocm-capture-regression-test-present": rocm_capture_regression_test_present,
    "rocm-aiter-unified-capture-keeps-offsets": (
        rocm_aiter_unified_capture_keeps_offsets
    ),
    "static-sink-keeps-shared-seq-lens": static_sink_keeps_shared_seq_lens,
    "static-sink-regression-test-present": static_sink_regression_test_present,
}


def check_invariant(name: str, tree: Path) -> InvariantResult:
    try:
        check = INVARIANTS[name]
    except KeyError:
        known = ", ".join(sorted(INVARIANTS))
        raise KeyError(f"unknown invariant {name!r} (known: {known})") from None
    return check(tree)
