"""Where does the bug live? A verdict on one vLLM tree or install, AST only.

Works on a git checkout, a release tree or the installed vLLM; nothing is
imported from the target (so it is fast and safe on any tree) and nothing
in it changes. Each patch's state is the one check and apply give for the
same tree (:func:`vllm_patchkit.checkout.classify_path`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from vllm_overlay.aiter_shape import inspect_aiter_tree
from vllm_overlay.capture_shape import Shape, inspect_capture_tree
from vllm_overlay.entry_points import (
    ENTRY_POINT_GROUP,
    ENTRY_POINT_NAME,
    entry_point_registered,
)
from vllm_overlay.fixes import assess_tree
from vllm_overlay.install import Action, assess_file
from vllm_overlay.record import AITER_UNIFIED_OFFSETS, CAPTURE_HOST_OFFSETS, RECORD
from vllm_patchkit.checkout import PatchReport, classify_path
from vllm_patchkit.errors import InputError
from vllm_patchkit.installed import installed_vllm_dir
from vllm_patchkit.invariants import check_invariant
from vllm_patchkit.series import Series
from vllm_patchkit.versions import tree_version

__all__ = [
    "Diagnosis",
    "FixStatus",
    "NotAVllmTreeError",
    "diagnose",
    "fix_statuses",
    "tree_version",
]


class NotAVllmTreeError(InputError):
    """doctor PATH names a directory without ``vllm/__init__.py``."""


@dataclass
class FixStatus:
    """One fix on one tree: does the tree need it, and what the series does."""

    fix: str
    affected: bool | None
    """None: cannot judge (the file does not parse, or its shape is not
    proven)."""
    detail: str
    patch: str
    patch_state: str
    """The series patch's :class:`PatchState` here (not-carried included)."""
    overlay: str = ""
    """What the overlay would do for this fix on this tree (its Action)."""


@dataclass
class Diagnosis:
    target: str
    vllm_version: str
    affected: bool | None
    """None: cannot judge (the file does not parse, or what the capture does
    to the offsets is not proven)."""
    shape: str
    reason: str
    file: str
    line: int | None
    patches: list[PatchReport] = field(default_factory=list)
    installed: bool = False
    """The target is the vLLM installed here (not a tree given by path)."""
    overlay_entry_point: bool = False
    overlay_would_activate: bool = False
    overlay_decision: str = ""
    """What the overlay would do with this code, and why (file and line)."""
    overlay_record: list[dict[str, object]] = field(default_factory=list)
    """What the overlay patches: target, why, how, related PRs, removal."""
    fixes: list[FixStatus] = field(default_factory=list)
    """Each fix separately (#51585, #53821): a release can need one, both or
    none. ``affected`` above is #51585's, which decides the exit code."""

    @property
    def judged(self) -> bool:
        return self.affected is not None

    @property
    def protected(self) -> bool:
        """Not affected, or the installed vLLM gets the fix from the overlay."""
        return self.affected is False or bool(
            self.affected
            and self.installed
            and self.overlay_entry_point
            and self.overlay_would_activate
        )


FIX_INVARIANTS = {
    "#51585": "rocm-capture-zeroes-device-offsets-only",
    "#53821": "rocm-aiter-unified-capture-keeps-offsets",
}
FIX_RECORDS = {
    "#51585": CAPTURE_HOST_OFFSETS.name,
    "#53821": AITER_UNIFIED_OFFSETS.name,
}
"""The overlay's record entry for each fix."""
OVERLAY_ENTRY_POINT = (ENTRY_POINT_GROUP, ENTRY_POINT_NAME)
"""The overlay's plugin entry point (group, name): vLLM loads what it names."""
AITER_FILE = "vllm/v1/attention/backends/rocm_aiter_unified_attn.py"


def fix_statuses(
    root: Path, series: Series, patches: list[PatchReport]
) -> list[FixStatus]:
    """#51585 and #53821 on ``root``: affected, and the state of each one's
    patch (the patch whose invariant is the fix's)."""
    code = inspect_capture_tree(root)
    states = {r.name: r.status for r in patches}
    overlay = {state.name: str(state.action) for state in assess_tree(root, "")}
    statuses = []
    for fix, invariant in FIX_INVARIANTS.items():
        patch = next((p for p in series.patches if p.invariant == invariant), None)
        name = patch.name if patch else "(none in the series)"
        state = str(states.get(name, "-"))
        if fix == "#51585":
            affected = code.shape is Shape.BUGGY if code.judged else None
            detail = code.detail
        elif not (root / AITER_FILE).is_file():
            affected, detail = False, f"no {AITER_FILE}: no AITER unified backend"
        elif not (aiter := inspect_aiter_tree(root)).judged:
            affected, detail = None, aiter.detail
        else:
            result = check_invariant(invariant, root)
            affected, detail = not result.holds, result.detail
        statuses.append(
            FixStatus(fix, affected, detail, name, state, overlay[FIX_RECORDS[fix]])
        )
    return statuses


def diagnose(series: Series, path: Path | None = None) -> Diagnosis:
    root = path.resolve() if path is not None else installed_vllm_dir().parent
    if not (root / "vllm" / "__init__.py").is_file():
        raise NotAVllmTreeError(f"{root}: not a vLLM tree (no vllm/__init__.py)")
    code = inspect_capture_tree(root)
    version = tree_version(root)
    patches = classify_path(root, series)
    overlay = assess_file(code.file, version) if code.file.is_file() else None
    return Diagnosis(
        target=str(root) if path is not None else f"installed ({root})",
        vllm_version=version,
        affected=code.shape is Shape.BUGGY if code.judged else None,
        shape=str(code.shape),
        reason=code.detail,
        file=str(code.file),
        line=code.line,
        patches=patches,
        installed=path is None,
        overlay_entry_point=entry_point_registered(*OVERLAY_ENTRY_POINT),
        overlay_would_activate=bool(overlay and overlay.action is Action.INSTALLED),
        overlay_decision=(
            f"{overlay.action}: {overlay.reason}"
            if overlay
            else f"absent: {code.detail}"
        ),
        overlay_record=[target.as_dict() for target in RECORD],
        fixes=fix_statuses(root, series, patches),
    )
