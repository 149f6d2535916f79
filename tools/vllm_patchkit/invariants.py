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

from vllm_overlay.capture_shape import (
    CaptureCode,
    Shape,
    inspect_capture_source,
    inspect_capture_tree,
)

__all__ = [
    "INVARIANTS",
    "CaptureCode",
    "InvariantResult",
    "Shape",
    "check_invariant",
    "inspect_capture_source",
    "inspect_capture_tree",
]


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
BUILDER = "RocmAttentionMetadataBuilder"


def rocm_capture_regression_test_present(tree: Path) -> InvariantResult:
    """0002: vLLM's tests capture with the ROCm builder and check host offsets.

    Any module under tests/v1/attention counts, whatever its name or wording,
    so an edited upstream version of the test is recognised as upstreamed.
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
        f"no test in {ATTENTION_TESTS} captures with {BUILDER} and checks "
        "query_start_loc_cpu",
        tree / ATTENTION_TESTS,
        None,
    )


def _regression_test_line(path: Path) -> int | None:
    """The line of a test that captures and reads the host offsets, if any."""
    source = path.read_text(errors="replace")
    if BUILDER not in source or "build_for_cudagraph_capture" not in source:
        return None
    try:
        module = ast.parse(source)
    except SyntaxError:
        return None
    wanted = {"build_for_cudagraph_capture", "query_start_loc_cpu"}
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            used = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
            if wanted <= used:
                return node.lineno
    return None


INVARIANTS: dict[str, Callable[[Path], InvariantResult]] = {
    "rocm-capture-zeroes-device-offsets-only": rocm_capture_zeroes_device_offsets_only,
    "rocm-capture-regression-test-present": rocm_capture_regression_test_present,
}


def check_invariant(name: str, tree: Path) -> InvariantResult:
    try:
        check = INVARIANTS[name]
    except KeyError:
        known = ", ".join(sorted(INVARIANTS))
        raise KeyError(f"unknown invariant {name!r} (known: {known})") from None
    return check(tree)


AITER_UNIFIED = Path("vllm/v1/attention/backends/rocm_aiter_unified_attn.py")
AITER_BACKEND = "RocmAiterUnifiedAttentionBackend"
_OFFSETS = ("query_start_loc", "query_start_loc_cpu")


def rocm_aiter_unified_capture_keeps_offsets(tree: Path) -> InvariantResult:
    """0003: AITER unified's capture keeps both offsets; ROCM_ATTN's is 0001's.

    ``RocmAiterUnifiedAttentionBackend.get_builder_cls`` must name a builder
    of the module's own whose ``build_for_cudagraph_capture`` fills
    ``seq_lens`` with 1, writes neither offsets tensor (no in-place call, no
    assignment, on any object) and does not hand the capture on to the ROCm
    builder's (which zeroes). The ROCm builder itself must still zero the
    device offsets in place and leave the host ones (0001's shape). Upstream's
    builder (0.29.0+) has this shape, whatever its name, so the patch is then
    reported as upstreamed.
    """
    name = "rocm-aiter-unified-capture-keeps-offsets"
    file = tree / AITER_UNIFIED
    if not file.is_file():
        return InvariantResult(name, False, f"no {AITER_UNIFIED}", file, None)
    try:
        module = ast.parse(file.read_text(errors="replace"), filename=str(file))
    except SyntaxError as exc:
        return InvariantResult(name, False, f"syntax error: {exc}", file, exc.lineno)
    holds, detail, line = _aiter_capture_shape(module)
    if not holds:
        return InvariantResult(name, False, detail, file, line)
    rocm = inspect_capture_tree(tree)
    if rocm.shape is not Shape.FIXED:
        return InvariantResult(
            name, False, f"ROCM_ATTN: {rocm.detail}", rocm.file, rocm.line
        )
    return InvariantResult(
        name, True, f"{detail}; ROCM_ATTN zeroes the device offsets only", file, line
    )


def _aiter_capture_shape(module: ast.Module) -> tuple[bool, str, int | None]:
    classes = {n.name: n for n in module.body if isinstance(n, ast.ClassDef)}
    backend = classes.get(AITER_BACKEND)
    getter = backend and _method(backend, "get_builder_cls")
    if getter is None:
        return False, f"no {AITER_BACKEND}.get_builder_cls", None
    returned = [
        n.value.id
        for n in ast.walk(getter)
        if isinstance(n, ast.Return) and isinstance(n.value, ast.Name)
    ]
    if len(returned) != 1:
        return False, "get_builder_cls does not return one class by name", getter.lineno
    builder_name = returned[0]
    if builder_name == BUILDER:
        why = f"{AITER_BACKEND} hands out {BUILDER}, whose capture zeroes"
        return False, f"{why} the device offsets", getter.lineno
    builder = classes.get(builder_name)
    capture = builder and _method(builder, "build_for_cudagraph_capture")
    if capture is None:
        return (
            False,
            f"{builder_name} has no build_for_cudagraph_capture of its own",
            builder.lineno if builder else getter.lineno,
        )
    where = f"{builder_name}.build_for_cudagraph_capture"
    for node in ast.walk(capture):
        if _delegates_capture(node):
            return False, f"{where} calls the ROCm builder's capture", node.lineno
        written = _written_offsets(node)
        if written:
            return False, f"{where} writes {written}", node.lineno
    if not any(_fills_seq_lens_with_one(n) for n in ast.walk(capture)):
        return False, f"{where} does not fill seq_lens with 1", capture.lineno
    return True, f"{where} keeps both query offsets", capture.lineno


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    for item in cls.body:
        if isinstance(item, ast.FunctionDef) and item.name == name:
            return item
    return None


def _offsets_in(node: ast.AST) -> str | None:
    """``query_start_loc`` or ``..._cpu`` if ``node`` is (a slice of) one."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute) and node.attr in _OFFSETS:
        return node.attr
    return None


def _written_offsets(node: ast.AST) -> str | None:
    """The offsets tensor ``node`` writes in place or rebinds, if any."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        method = node.func.attr
        if method.endswith("_") and not method.endswith("__"):
            return _offsets_in(node.func.value)
    targets: list[ast.AST] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        targets = [node.target]
    while targets:
        target = targets.pop()
        if isinstance(target, ast.Tuple | ast.List):
            targets.extend(target.elts)
        elif found := _offsets_in(target):
            return found
    return None


def _delegates_capture(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "build_for_cudagraph_capture"
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


INVARIANTS["rocm-aiter-unified-capture-keeps-offsets"] = (
    rocm_aiter_unified_capture_keeps_offsets
)
