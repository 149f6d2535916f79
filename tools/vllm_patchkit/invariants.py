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
