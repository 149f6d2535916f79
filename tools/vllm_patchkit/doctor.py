"""Where does the bug live? A verdict on one vLLM tree or install, AST only.

Works on a git checkout, a release tree or the installed vLLM; nothing is
imported from the target (so it is fast and safe on any tree) and nothing
in it changes: patch applicability is checked with ``git apply --check``.
"""

from __future__ import annotations

import ast
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from vllm_overlay.capture_shape import Shape, inspect_capture_tree
from vllm_overlay.doctor import entry_point_registered
from vllm_overlay.install import Action, assess_file
from vllm_overlay.record import RECORD
from vllm_patchkit.checkout import PatchReport, PatchState, invariant_holds
from vllm_patchkit.gitcmd import Git, git_executable
from vllm_patchkit.installed import installed_vllm_dir
from vllm_patchkit.series import Series


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


def tree_version(root: Path) -> str:
    """The release a tree claims: vllm/_version.py, else git describe."""
    version_file = root / "vllm" / "_version.py"
    if version_file.is_file():
        for node in ast.walk(ast.parse(version_file.read_text())):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                names = {t.id for t in node.targets if isinstance(t, ast.Name)}
                if names & {"__version__", "version"}:
                    return str(node.value.value)
    dist_info = sorted(root.glob("vllm-*.dist-info"))
    if dist_info:
        return dist_info[-1].name.removeprefix("vllm-").removesuffix(".dist-info")
    proc = Git(root).run("describe", "--tags", "--always", check=False)
    return proc.stdout.strip() if proc.returncode == 0 else "unknown"


def _patch_status(root: Path, series: Series) -> list[PatchReport]:
    reports = []
    git = Git(root)
    for patch in series.patches:
        if invariant_holds(git, patch):
            reports.append(
                PatchReport(patch.name, PatchState.UPSTREAMED, "invariant holds")
            )
            continue
        # Outside a repository git apply acts like patch(1); inside one it
        # checks against the work tree. --check never writes.
        proc = subprocess.run(
            [git_executable(), "apply", "--check", str(patch.path)],
            cwd=root,
            capture_output=True,
            text=True,
        )
        if proc.returncode == 0:
            reports.append(
                PatchReport(patch.name, PatchState.APPLIES, "git apply --check")
            )
        else:
            reverse = subprocess.run(
                [git_executable(), "apply", "--check", "--reverse", str(patch.path)],
                cwd=root,
                capture_output=True,
                text=True,
            )
            status = (
                PatchState.APPLIED if reverse.returncode == 0 else PatchState.CONFLICT
            )
            reports.append(PatchReport(patch.name, status, proc.stderr.strip()[:200]))
    return reports


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
        patches=_patch_status(root, series),
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
