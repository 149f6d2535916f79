"""Where does the bug live? A verdict on one vLLM tree or install, AST only.

Works on a git checkout, a release tree or the installed vLLM; nothing is
imported from the target (so it is fast and safe on any tree) and nothing
in it changes. Each patch's state is the one check and apply give for the
same tree (:func:`vllm_patchkit.git.checkout.classify_path`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_overlay.entry_points import (
    ENTRY_POINT_GROUP,
    ENTRY_POINT_NAME,
    entry_point_registered,
)
from vllm_overlay.fixes import FIXES, RECORD, assess_tree, off_reason
from vllm_overlay.fixes.base import Fix
from vllm_overlay.state import Action, InstallState
from vllm_patchkit.errors import InputError
from vllm_patchkit.git.carry import read_version
from vllm_patchkit.git.checkout import PatchReport, classify_path
from vllm_patchkit.git.series import Series
from vllm_patchkit.trees.installed import installed_vllm_dir
from vllm_patchkit.trees.versions import release_text, tree_version

__all__ = [
    "Diagnosis",
    "FixStatus",
    "NotAVllmTreeError",
    "diagnose",
    "fix_needs",
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
    proven, or the target is missing from a tree that may have had it)."""
    detail: str
    patch: str
    patch_state: str
    """The series patch's :class:`PatchState` here (not-carried included)."""
    overlay: str = ""
    """What the overlay would do for this fix on this tree (its Action)."""
    shape: str = "missing"
    file: str = ""
    line: int | None = None
    protected: bool = False
    """Not affected, or (the installed vLLM) the overlay would install it."""
    overlay_active: bool = False
    """The overlay would install it as vLLM starts here (not disabled)."""
    overlay_decision: str = ""


@dataclass
class Diagnosis:
    target: str
    vllm_version: str
    affected: bool | None
    """The deciding fix's word (see :attr:`fix`): yes when one is needed and
    not protected, else None (cannot judge) when one cannot be read, else
    whether one is needed."""
    fix: str
    """The fix whose word is the tree's (:func:`deciding`), whose code
    :attr:`shape`, :attr:`file` and :attr:`line` show, so the tree's line
    never pairs one fix's word with another's code."""
    shape: str
    reason: str
    file: str
    line: int | None
    patches: list[PatchReport] = field(default_factory=list)
    installed: bool = False
    """The target is the vLLM installed here (not a tree given by path)."""
    overlay_entry_point: bool = False
    overlay_would_activate: bool = False
    """The overlay would install every fix this vLLM needs."""
    overlay_decision: str = ""
    """What the overlay would do with the deciding fix's code, and why."""
    overlay_record: list[dict[str, object]] = field(default_factory=list)
    """What the overlay patches: target, why, how, related PRs, removal."""
    fixes: list[FixStatus] = field(default_factory=list)
    """Each fix separately: a release can need one, several or none."""

    @classmethod
    def over(
        cls, fixes: list[FixStatus], target: str, vllm_version: str, **rest: Any
    ) -> Diagnosis:
        """The diagnosis whose tree-level word and code are the
        :func:`deciding` fix's; ``rest``: the other fields."""
        decides = deciding(fixes)
        return cls(
            target=target,
            vllm_version=vllm_version,
            affected=decides.affected,
            fix=decides.fix,
            shape=decides.shape,
            reason=decides.detail,
            file=decides.file,
            line=decides.line,
            overlay_decision=decides.overlay_decision,
            fixes=fixes,
            **rest,
        )

    @property
    def judged(self) -> bool:
        return all(fix.affected is not None for fix in self.fixes)

    @property
    def protected(self) -> bool:
        """Every fix: not affected, or the installed vLLM gets it from the
        overlay (a tree given by path is protected only by patching it)."""
        return all(fix.protected for fix in self.fixes)

    @property
    def summary(self) -> str:
        """Every fix's word, in one line: ``<label>: no (fixed); ...``."""
        words = {True: "yes", False: "no", None: "cannot judge"}
        return "; ".join(
            f"{fix.fix}: {words[fix.affected]} ({fix.shape})" for fix in self.fixes
        )


OVERLAY_ENTRY_POINT = (ENTRY_POINT_GROUP, ENTRY_POINT_NAME)
"""The overlay's plugin entry point (group, name): vLLM loads what it names."""


def overlay_word(state: InstallState, configured: bool = True) -> str:
    """The overlay's decision for one fix; ``configured``: as vLLM started in
    this environment would take it (``VLLM_OVERLAY_DISABLE``, ``VLLM_PLUGINS``),
    else what the overlay does to that code whatever this shell sets."""
    off = configured and off_reason(state.name)
    return "disabled" if off else str(state.action)


def fix_needs(
    root: Path, states: list[InstallState] | None = None
) -> list[tuple[Fix, InstallState, bool | None]]:
    """Each fix of the registry with the overlay's decision on ``root`` and
    whether the tree needs it (:meth:`~vllm_overlay.fixes.base.Fix.affected`
    by the release the tree vouches for; None: cannot judge): what doctor,
    the matrix's columns and the overlay probe all read."""
    version = read_version(root)
    release = (
        release_text(version.release) if version.trusted and version.release else None
    )
    decided = states or assess_tree(root, "")
    return [
        (fix, state, fix.affected(state, release))
        for fix, state in zip(FIXES, decided, strict=True)
    ]


def fix_statuses(
    root: Path,
    series: Series,
    patches: list[PatchReport],
    states: list[InstallState] | None = None,
    configured: bool = True,
    installed: bool = False,
) -> list[FixStatus]:
    """Each fix of the registry on ``root``: affected
    (:meth:`vllm_overlay.fixes.base.Fix.affected`, by the version the tree
    vouches for), and the state of its patch in the series (``configured``:
    see :func:`overlay_word`); ``installed``: ``root`` is the vLLM installed
    here, which the overlay protects."""
    by_patch = {r.name: r.status for r in patches}
    statuses = []
    entry_point = installed and entry_point_registered(*OVERLAY_ENTRY_POINT)
    for fix, state, affected in fix_needs(root, states):
        patch = next(iter(series.of_fix(fix)), None)
        name = patch.name if patch else "(none in the series)"
        code = state.code
        detail = code.detail if code is not None else state.reason
        file = code.file if code is not None else root / fix.record.source_file
        off = off_reason(fix.name)
        active = entry_point and state.action is Action.INSTALLED and off is None
        statuses.append(
            FixStatus(
                fix.pr,
                affected,
                detail,
                name,
                str(by_patch.get(name, "-")),
                overlay_word(state, configured),
                shape=str(code.shape) if code is not None else "missing",
                file=str(file),
                line=code.line if code is not None else None,
                protected=affected is False or bool(affected and active),
                overlay_active=active,
                overlay_decision=(
                    f"disabled: {off}" if off else f"{state.action}: {state.reason}"
                ),
            )
        )
    return statuses


def deciding(fixes: list[FixStatus]) -> FixStatus:
    """The fix whose word is the tree's: the first needed and not protected
    (whatever else cannot be read: a failure outranks what could not run,
    as in the regression verdict), else the first that cannot be judged,
    else the first needed, else the first."""
    return next(
        (f for f in fixes if f.affected and not f.protected),
        next(
            (f for f in fixes if f.affected is None),
            # None needed: any fix's code says so; the registry's order picks.
            next((f for f in fixes if f.affected), fixes[0]),
        ),
    )


def diagnose(series: Series, path: Path | None = None) -> Diagnosis:
    root = path.resolve() if path is not None else installed_vllm_dir().parent
    if not (root / "vllm" / "__init__.py").is_file():
        raise NotAVllmTreeError(f"{root}: not a vLLM tree (no vllm/__init__.py)")
    version = tree_version(root)
    patches = classify_path(root, series)
    states = assess_tree(root, version)
    fixes = fix_statuses(root, series, patches, states, installed=path is None)
    needed = [f for f in fixes if f.affected is not False]
    return Diagnosis.over(
        fixes,
        target=str(root) if path is not None else f"installed ({root})",
        vllm_version=version,
        patches=patches,
        installed=path is None,
        overlay_entry_point=entry_point_registered(*OVERLAY_ENTRY_POINT),
        overlay_would_activate=bool(needed) and all(f.overlay_active for f in needed),
        overlay_record=[target.as_dict() for target in RECORD],
    )
