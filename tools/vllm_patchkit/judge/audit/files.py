"""The audit's static pass on the files a change touches: the pre-commit hook.

``vllm-metadata-writes`` (``.pre-commit-hooks.yaml``) hands the changed files
of a vLLM checkout to :func:`judge_files`: the builders they define, build on
or hand out are read as the full audit's static pass reads them, in about a
second, with nothing imported (no torch, no vLLM). A write found only by
reading is ``latent`` (its effect is the full audit's dynamic pass to
measure), ``intentional`` when it is a documented band-aid, and ``harmful``
when it is a band-aid that another backend runs and reads (:mod:`.reach`).
A module of the tree it could not read (too large, not a regular file, not
Python text, not parsable) is named, and the hook cannot judge (exit 3)
unless a harmful write already decides: an unseen write is never a pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_patchkit.errors import EXIT_ERROR, EXIT_FAILED, EXIT_OK
from vllm_patchkit.judge.audit.findings import Finding
from vllm_patchkit.judge.audit.run import merge, rank
from vllm_patchkit.judge.audit.static import analyse_tree


@dataclass
class FilesReport:
    files: list[str]
    findings: list[Finding]
    metadata_class: str | None
    not_read: dict[str, str] = field(default_factory=dict)
    """Modules of the tree not read or not parsed (path -> why)."""

    @property
    def harmful(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == "harmful"]

    @property
    def exit_code(self) -> int:
        """1 on a harmful write; 3 when a module was not read, or the tree has
        no metadata class to judge by."""
        if self.harmful:
            return EXIT_FAILED
        if self.not_read or (self.metadata_class is None and self.findings):
            return EXIT_ERROR
        return EXIT_OK

    def to_json(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "exit_code": self.exit_code,
            "metadata_class": self.metadata_class,
            "findings": [f.to_json() for f in self.findings],
            "not_read": dict(sorted(self.not_read.items())),
        }

    def lines(self) -> list[str]:
        """One ``file:line: kind: what`` per finding, harmful first, then one
        ``file: not read: why`` per module not read."""
        ordered = sorted(self.findings, key=lambda f: (rank(f.kind), f.file, f.line))
        return [f"{f.file}:{f.line}: {f.kind}: {describe(f)}" for f in ordered] + [
            f"{path}: not read: {why}" for path, why in sorted(self.not_read.items())
        ]


def describe(finding: Finding) -> str:
    what = f"{finding.operation} of {finding.field} in {finding.method}"
    if finding.kind == "harmful":
        return f"{what}: harmful for {', '.join(finding.victims)}: {finding.reason}"
    if finding.kind == "intentional":
        return f"{what} (a documented band-aid)"
    return (
        f"{what} (writes shared metadata; its effect is measured by "
        "`vllm-patchkit audit`)"
    )


def judge_files(root: Path, files: list[str]) -> FilesReport:
    """The static pass over what ``files`` (relative to ``root``) define."""
    static = analyse_tree(root, files)
    return FilesReport(
        files, merge(static, None), static.metadata_class, static.not_read
    )
