"""Where does the bug live? A verdict on one vLLM tree or install, AST only.

Works on a git checkout, a release tree or the installed vLLM; nothing is
imported from the target (so it is fast and safe on any tree) and nothing
in it changes. Each patch's state is the one check and apply give for the
same tree (:func:`vllm_patchkit.git.checkout.classify_path`); each fix's
word and the tree's are the overlay's own doctor's
(:mod:`vllm_overlay.diagnosis`), presented with the series beside them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_overlay.diagnosis import Finding, deciding
from vllm_overlay.entry_points import entry_point_registered
from vllm_overlay.fixes import FIXES, RECORD, assess_tree
from vllm_overlay.state import InstallState
from vllm_patchkit.errors import InputError
from vllm_patchkit.git.carry import read_version
from vllm_patchkit.git.checkout import PatchReport, classify_path
from vllm_patchkit.git.series import Series
from vllm_patchkit.trees.installed import installed_vllm_dir
from vllm_patchkit.trees.versions import tree_release


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


def fix_findings(
    root: Path, states: list[InstallState] | None = None, installed: bool = False
) -> list[Finding]:
    """Each fix of the registry on ``root``, judged by the release the tree
    vouches for (:class:`~vllm_overlay.diagnosis.Finding`, the overlay's own
    doctor's logic); ``installed``: ``root`` is the vLLM installed here,
    which the overlay protects: what doctor, the matrix's columns and the
    overlay probe all read."""
    version = read_version(root)
    release = str(version.release) if version.trusted and version.release else None
    entry_point = installed and entry_point_registered()
    decided = states or assess_tree(root, "")
    return [Finding.of(state, release, entry_point, root) for state in decided]


def fix_statuses(
    root: Path,
    series: Series,
    patches: list[PatchReport],
    states: list[InstallState] | None = None,
    configured: bool = True,
    installed: bool = False,
) -> list[FixStatus]:
    """Each fix's :func:`fix_findings` with the state of its patch in the
    series; ``configured``: the overlay's word as vLLM started in this
    environment would take it (``VLLM_OVERLAY_DISABLE``, ``VLLM_PLUGINS``),
    else what the overlay does to that code whatever this shell sets."""
    by_patch = {r.name: r.status for r in patches}
    statuses = []
    for fix, found in zip(FIXES, fix_findings(root, states, installed), strict=True):
        patch = next(iter(series.of_fix(fix)), None)
        name = patch.name if patch else "(none in the series)"
        statuses.append(
            FixStatus(
                found.pr,
                found.affected,
                found.detail,
                name,
                str(by_patch.get(name, "-")),
                found.decision(configured),
                shape=found.shape,
                file=found.file,
                line=found.line,
                protected=found.protected,
                overlay_active=found.would_install,
                overlay_decision=(
                    f"disabled: {found.off}"
                    if found.off
                    else f"{found.action}: {found.reason}"
                ),
            )
        )
    return statuses


def diagnose(series: Series, path: Path | None = None) -> Diagnosis:
    root = path.resolve() if path is not None else installed_vllm_dir().parent
    if not (root / "vllm" / "__init__.py").is_file():
        raise NotAVllmTreeError(f"{root}: not a vLLM tree (no vllm/__init__.py)")
    version = tree_release(root)[0]
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
        overlay_entry_point=entry_point_registered(),
        overlay_would_activate=bool(needed) and all(f.overlay_active for f in needed),
        overlay_record=[target.as_dict() for target in RECORD],
    )
