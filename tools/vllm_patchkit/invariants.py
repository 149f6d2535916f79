"""Invariants: what a vLLM source tree must look like once a patch is in.

A textual patch can apply with fuzz and land in the wrong place, or apply
cleanly to code that already has the fix. An invariant reads the code
itself (its AST; nothing is imported) and answers one question per patch,
so the same check verifies an application, detects that upstream carries
the fix, and tells whether a tree is affected.
"""

from __future__ import annotations

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


INVARIANTS: dict[str, Callable[[Path], InvariantResult]] = {
    "rocm-capture-zeroes-device-offsets-only": rocm_capture_zeroes_device_offsets_only,
}


def check_invariant(name: str, tree: Path) -> InvariantResult:
    try:
        check = INVARIANTS[name]
    except KeyError:
        known = ", ".join(sorted(INVARIANTS))
        raise KeyError(f"unknown invariant {name!r} (known: {known})") from None
    return check(tree)
