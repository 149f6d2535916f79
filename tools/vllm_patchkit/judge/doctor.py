"""Where does the bug live? A verdict on one vLLM tree or install, AST only.

Works on a git checkout, a release tree or the installed vLLM; nothing is
imported from the target (so it is fast and safe on any tree) and nothing
in it changes. Each patch's state is the one check and apply give for the
same tree (:func:`vllm_patchkit.git.checkout.classify_path`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from vllm_overlay.entry_points import (
    ENTRY_POINT_GROUP,
    ENTRY_POINT_NAME,
    entry_point_registered,
)
from vllm_overlay.fixes import FIXES, RECORD, assess_tree, off_reason
from vllm_overlay.record import PatchTarget
from vllm_overlay.state import Action, InstallState
from vllm_patchkit.errors import InputError
from vllm_patchkit.git.carry import TreeVersion, read_version
from vllm_patchkit.git.checkout import PatchReport, classify_path
from vllm_patchkit.git.series import Series
from vllm_patchkit.trees.installed import installed_vllm_dir
from vllm_patchkit.trees.versions import parse_release, tree_version

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


OVERLAY_ENTRY_POINT = (ENTRY_POINT_GROUP, ENTRY_POINT_NAME)
"""The overlay's plugin entry point (group, name): vLLM loads what it names."""


def overlay_word(state: InstallState, configured: bool = True) -> str:
    """The overlay's decision for one fix; ``configured``: as vLLM started in
    this environment would take it (``VLLM_OVERLAY_DISABLE``, ``VLLM_PLUGINS``),
    else what the overlay does to that code whatever this shell sets."""
    off = configured and off_reason(state.name)
    return "disabled" if off else str(state.action)


def affected(
    state: InstallState, target: PatchTarget, version: TreeVersion
) -> bool | None:
    """Whether the tree needs the fix (None: cannot judge): the overlay's
    proof of the code (:attr:`InstallState.affected`), except for a missing
    target. A fork may have moved the code (rocm_attn.py renamed, the class
    elsewhere, still buggy), so a missing target is "cannot judge", unless
    a version the tree vouches for (:func:`read_version`) is older than
    every release the target's bug is in: that release never had it."""
    if state.action is not Action.ABSENT:
        return state.affected
    first = parse_release(target.affected.partition("-")[0])
    release = version.release
    if version.trusted and release is not None and first and release < first:
        return False
    return None


def fix_statuses(
    root: Path,
    series: Series,
    patches: list[PatchReport],
    states: list[InstallState] | None = None,
    configured: bool = True,
) -> list[FixStatus]:
    """Each fix of the registry on ``root``: affected (:func:`affected`),
    and the state of its patch in the series (``configured``: see
    :func:`overlay_word`)."""
    by_patch = {r.name: r.status for r in patches}
    statuses = []
    version = read_version(root)
    for fix, state in zip(FIXES, states or assess_tree(root, ""), strict=True):
        patch = next((p for p in series.patches if p.name in fix.patches), None)
        name = patch.name if patch else "(none in the series)"
        detail = state.code.detail if state.code is not None else state.reason
        statuses.append(
            FixStatus(
                fix.pr,
                affected(state, fix.record, version),
                detail,
                name,
                str(by_patch.get(name, "-")),
                overlay_word(state, configured),
            )
        )
    return statuses


def diagnose(series: Series, path: Path | None = None) -> Diagnosis:
    root = path.resolve() if path is not None else installed_vllm_dir().parent
    if not (root / "vllm" / "__init__.py").is_file():
        raise NotAVllmTreeError(f"{root}: not a vLLM tree (no vllm/__init__.py)")
    version = tree_version(root)
    patches = classify_path(root, series)
    states = assess_tree(root, version)
    first = states[0]  # the first fix's (#51585's) verdict is the tree's
    code = first.code
    file = code.file if code is not None else root / FIXES[0].record.source_file
    off = off_reason(first.name)
    return Diagnosis(
        target=str(root) if path is not None else f"installed ({root})",
        vllm_version=version,
        affected=affected(first, FIXES[0].record, read_version(root)),
        shape=str(code.shape) if code is not None else "missing",
        reason=code.detail if code is not None else first.reason,
        file=str(file),
        line=code.line if code is not None else None,
        patches=patches,
        installed=path is None,
        overlay_entry_point=entry_point_registered(*OVERLAY_ENTRY_POINT),
        overlay_would_activate=first.action is Action.INSTALLED and off is None,
        overlay_decision=(
            f"disabled: {off}" if off else f"{first.action}: {first.reason}"
        ),
        overlay_record=[target.as_dict() for target in RECORD],
        fixes=fix_statuses(root, series, patches, states),
    )
