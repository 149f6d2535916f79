"""Apply the series to a vLLM git checkout as commits, all or nothing.

Each patch goes in with ``git am -3``; afterwards every patch's invariant
must hold, which catches a hunk that applied with fuzz in the wrong place.
Any failure puts HEAD, the branch, the index and the work tree back where
they were. A dirty checkout is refused before anything is touched.
"""

from __future__ import annotations

import enum
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from vllm_patchkit.gitcmd import TOOL_IDENTITY, Git
from vllm_patchkit.invariants import check_invariant
from vllm_patchkit.series import Patch, Series


class Status(enum.StrEnum):
    APPLIED = "applied"
    ALREADY_APPLIED = "already-applied"
    UPSTREAMED = "upstreamed"
    CONFLICT = "conflict"
    REFUSED = "refused"
    ERROR = "error"


@dataclass
class PatchReport:
    name: str
    status: str
    detail: str = ""
    files: list[str] = field(default_factory=list)


@dataclass
class ApplyResult:
    status: Status
    message: str
    head_before: str | None = None
    head_after: str | None = None
    patches: list[PatchReport] = field(default_factory=list)


class NotACheckoutError(ValueError):
    """The path is not a vLLM git checkout the tool can work on."""


def open_checkout(path: Path) -> Git:
    """The git work tree at ``path``; raise NotACheckoutError otherwise."""
    path = path.resolve()
    if not path.is_dir():
        raise NotACheckoutError(f"{path}: no such directory")
    git = Git(path)
    top = git.toplevel()
    if top is None:
        raise NotACheckoutError(f"{path}: not a git checkout")
    if top != path:
        raise NotACheckoutError(f"{path}: not the top of its git checkout ({top})")
    if not (path / "vllm" / "__init__.py").is_file():
        raise NotACheckoutError(f"{path}: a git checkout, but not of vLLM (no vllm/)")
    if git.run("rev-parse", "--verify", "--quiet", "HEAD", check=False).returncode:
        raise NotACheckoutError(f"{path}: the checkout has no commits")
    return git


def dirty_reason(git: Git) -> str | None:
    status = git.status_porcelain()
    if not status:
        return None
    entries = [e for e in status.split("\0") if e]
    shown = ", ".join(e[3:] for e in entries[:5])
    more = f" and {len(entries) - 5} more" if len(entries) > 5 else ""
    return f"uncommitted changes or untracked files: {shown}{more}"


def committer_env(git: Git) -> dict[str, str]:
    """The user's identity when configured, else the toolkit's."""
    configured = git.run("config", "user.email", check=False).stdout.strip()
    if configured:
        return {}
    return {k: v for k, v in TOOL_IDENTITY.items() if k.startswith("GIT_COMMITTER")}


def in_history(git: Git, patch: Patch, limit: int = 500) -> bool:
    """True when a commit with the same patch-id touches the patch's files."""
    wanted = _patch_id(git, patch.path.read_text())
    if wanted is None:
        return False
    shas = git.out(
        "log", f"--max-count={limit}", "--format=%H", "HEAD", "--", *patch.files
    ).split()
    for sha in shas:
        if _patch_id(git, git.run("show", "--format=", sha).stdout) == wanted:
            return True
    return False


def _patch_id(git: Git, diff: str) -> str | None:
    out = git.run("patch-id", "--stable", input_text=diff).stdout.split()
    return out[0] if out else None


def invariant_holds(git: Git, patch: Patch) -> bool | None:
    """None when the patch declares no invariant."""
    if patch.invariant is None:
        return None
    return check_invariant(patch.invariant, git.root).holds


def apply_series(path: Path, series: Series) -> ApplyResult:
    """Apply ``series`` to the checkout at ``path``; see the module docstring."""
    try:
        git = open_checkout(path)
    except NotACheckoutError as exc:
        return ApplyResult(Status.REFUSED, str(exc))
    reason = dirty_reason(git)
    if reason:
        return ApplyResult(
            Status.REFUSED, f"{path}: refusing a dirty checkout ({reason})"
        )
    head = git.head()
    reports: list[PatchReport] = []
    pending: list[Patch] = []
    for patch in series.patches:
        if in_history(git, patch):
            reports.append(PatchReport(patch.name, "applied", "already in history"))
        elif invariant_holds(git, patch):
            reports.append(
                PatchReport(
                    patch.name, "upstreamed", "invariant holds without the patch"
                )
            )
        else:
            pending.append(patch)
            reports.append(PatchReport(patch.name, "pending", files=list(patch.files)))
    if not pending:
        upstreamed = any(r.status == "upstreamed" for r in reports)
        status = Status.UPSTREAMED if upstreamed else Status.ALREADY_APPLIED
        message = (
            "upstream already carries the fix; nothing to apply"
            if upstreamed
            else "the series is already applied"
        )
        return ApplyResult(status, message, head, head, reports)
    by_name = {r.name: r for r in reports}
    try:
        for patch in pending:
            report = by_name[patch.name]
            # --keep-non-patch: plain `git am` strips every [...] group from
            # the subject, which would drop vLLM's [Bugfix][ROCm] prefixes.
            proc = git.run(
                "am",
                "-3",
                "--keep-non-patch",
                "--keep-cr",
                str(patch.path),
                check=False,
                env=committer_env(git),
            )
            if proc.returncode != 0:
                report.status = "conflict"
                report.detail = _conflict_detail(git, proc)
                _roll_back(git, head)
                return ApplyResult(
                    Status.CONFLICT,
                    f"{patch.name} does not apply: {report.detail}",
                    head,
                    git.head(),
                    reports,
                )
            if invariant_holds(git, patch) is False:
                report.status = "conflict"
                report.detail = (
                    f"applied, but invariant {patch.invariant} does not hold"
                )
                _roll_back(git, head)
                return ApplyResult(
                    Status.CONFLICT,
                    f"{patch.name}: {report.detail}",
                    head,
                    git.head(),
                    reports,
                )
            report.status = "applied"
            report.detail = "invariant holds" if patch.invariant else ""
    except BaseException:
        _roll_back(git, head)
        raise
    return ApplyResult(
        Status.APPLIED, f"applied {len(pending)} patch(es)", head, git.head(), reports
    )


def _conflict_detail(git: Git, proc: subprocess.CompletedProcess[str]) -> str:
    unmerged = git.run(
        "diff", "--name-only", "--diff-filter=U", check=False
    ).stdout.split()
    lines = [
        line
        for line in (proc.stdout + proc.stderr).splitlines()
        if line.startswith(("error:", "CONFLICT", "Patch failed"))
    ]
    files = f" (conflicting files: {', '.join(unmerged)})" if unmerged else ""
    return ("; ".join(lines[:4]) or "git am failed") + files


def _roll_back(git: Git, head: str) -> None:
    """Abort a half-done ``git am`` and return the branch to ``head``."""
    if (git.git_dir() / "rebase-apply").exists():
        git.run("am", "--abort", check=False)
    git.run("reset", "--hard", "--quiet", head)
