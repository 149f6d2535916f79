"""Where does the bug live? A verdict on one vLLM tree or install, AST only.

Works on a git checkout, a release tree or the installed vLLM; nothing is
imported from the target (so it is fast and safe on any tree) and nothing
in it changes: patch applicability is checked with ``git apply --check``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from vllm_overlay.capture_shape import Shape, inspect_capture_tree
from vllm_overlay.doctor import entry_point_registered
from vllm_overlay.install import Action, assess_file
from vllm_overlay.record import RECORD
from vllm_patchkit.checkout import PatchReport, classify_tree
from vllm_patchkit.installed import installed_vllm_dir
from vllm_patchkit.series import Series
from vllm_patchkit.versions import tree_version

__all__ = ["Diagnosis", "diagnose", "tree_version"]


@dataclass
class Diagnosis:
    target: str
    vllm_version: str
    affected: bool | None
    """None: cannot judge (the file does not parse)."""
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


def diagnose(series: Series, path: Path | None = None) -> Diagnosis:
    root = path.resolve() if path is not None else installed_vllm_dir().parent
    if not (root / "vllm" / "__init__.py").is_file():
        raise ValueError(f"{root}: not a vLLM tree (no vllm/__init__.py)")
    code = inspect_capture_tree(root)
    version = tree_version(root)
    overlay = assess_file(code.file, version) if code.file.is_file() else None
    return Diagnosis(
        target=str(root) if path is not None else f"installed ({root})",
        vllm_version=version,
        affected=code.shape is Shape.BUGGY if code.judged else None,
        shape=str(code.shape),
        reason=code.detail,
        file=str(code.file),
        line=code.line,
        patches=classify_tree(root, series),
        installed=path is None,
        overlay_entry_point=entry_point_registered(),
        overlay_would_activate=bool(overlay and overlay.action is Action.INSTALLED),
        overlay_decision=(
            f"{overlay.action}: {overlay.reason}"
            if overlay
            else f"absent: {code.detail}"
        ),
        overlay_record=[target.as_dict() for target in RECORD],
    )
