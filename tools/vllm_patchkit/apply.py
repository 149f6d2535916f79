"""Apply the series to a vLLM git checkout as commits, all or nothing.

Each patch goes in with ``git am -3``; afterwards every patch's invariant
must hold, which catches a hunk that applied with fuzz in the wrong place.
Any failure (conflict, broken invariant, an exception, SIGINT or SIGTERM)
puts HEAD, the branch, the index and the work tree back where they were; a
SIGKILL is cleaned up by the next run (see :mod:`vllm_patchkit.guard`). A
dirty checkout is refused before anything is touched.
"""

from __future__ import annotations

import enum
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from vllm_patchkit.gitcmd import TOOL_IDENTITY, Git
from vllm_patchkit.guard import BusyError, CheckoutGuard, restore
from vllm_patchkit.invariants import check_invariant
from vllm_patchkit.series import Patch, Series

BASE_REF = "refs/vllm-patchkit/base"
"""The upstream commit the series sits on: written by apply and rebase, read
by refresh."""


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
    """applied, upstreamed, not-applied, would-conflict, conflict, pending."""
    detail: str = ""
    files: list[str] = field(default_factory=list)
    hunks: list[str] = field(default_factory=list)


@dataclass
class ApplyResult:
    status: Status
    message: str
    head_before: str | None = None
    head_after: str | None = None
    patches: list[PatchReport] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class NotACheckoutError(ValueError):
    """The path is not a vLLM git checkout the tool can work on."""


_IN_PROGRESS = {
    "rebase-apply": "a git am or rebase",
    "rebase-merge": "a git rebase",
    "MERGE_HEAD": "a git merge",
    "CHERRY_PICK_HEAD": "a git cherry-pick",
    "REVERT_HEAD": "a git revert",
}


def open_checkout(path: Path) -> Git:
    """The git work tree at ``path``; raise NotACheckoutError otherwise."""
    path = path.resolve()
    if not path.is_dir():
        raise NotACheckoutError(f"{path}: no such directory")
    git = Git(path)
    # One rev-parse for the common case; the separate calls below only run
    # to explain a failure precisely.
    proc = git.run(
        "rev-parse", "--show-toplevel", "--absolute-git-dir", "HEAD", check=False
    )
    if proc.returncode == 0:
        top, git_dir, _ = proc.stdout.splitlines()
        git._facts["git_dir"] = Path(git_dir)
    else:
        top = git.toplevel()
    if top is None:
        raise NotACheckoutError(f"{path}: not a git checkout")
    if Path(top) != path:
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
    entries = [e for e in status.split("\0") if e and len(e) > 3]
    shown = ", ".join(e[3:] for e in entries[:5])
    more = f" and {len(entries) - 5} more" if len(entries) > 5 else ""
    return f"uncommitted changes or untracked files: {shown}{more}"


def busy_reason(git: Git) -> str | None:
    """A git operation the user has in progress (not one of ours)."""
    git_dir = git.git_dir()
    for name, what in _IN_PROGRESS.items():
        if (git_dir / name).exists():
            return f"{what} is in progress; finish or abort it first"
    return None


def refusal(git: Git, *, allow_detached: bool = False) -> str | None:
    """Why a run that changes this checkout must not start, if it must not."""
    reason = busy_reason(git) or dirty_reason(git)
    if reason:
        return f"{git.root}: refusing: {reason}"
    if not allow_detached and git.branch() is None:
        return (
            f"{git.root}: refusing a detached HEAD: the commits would belong to no "
            "branch; check out a branch first (git switch -c NAME)"
        )
    return None


def committer_env(git: Git) -> dict[str, str]:
    """The user's identity when configured, else the toolkit's."""
    configured = git.run("config", "user.email", check=False).stdout.strip()
    if configured:
        return {}
    return {k: v for k, v in TOOL_IDENTITY.items() if k.startswith("GIT_COMMITTER")}


def in_history(git: Git, patch: Patch, limit: int = 200) -> bool:
    """True when a recent commit touching the patch's files has its patch-id."""
    log = git.run(
        "log",
        f"--max-count={limit}",
        "--format=commit %H",
        "--patch",
        "--full-index",
        "--no-color",
        "HEAD",
        "--",
        *patch.files,
    ).stdout
    # One `git log -p` and one `git patch-id` for the patch and all candidate
    # commits: the check stays fast on a real vLLM history. The patch file's
    # own "From 000..." line gives it the all-zero commit id.
    ids = git.run("patch-id", "--stable", input_text=patch.path.read_text() + log)
    pairs = [line.split() for line in ids.stdout.splitlines()]
    wanted = {pid for pid, commit in pairs if set(commit) == {"0"}}
    return any(pid in wanted for pid, commit in pairs if set(commit) != {"0"})


def invariant_holds(git: Git, patch: Patch) -> bool | None:
    """None when the patch declares no invariant."""
    if patch.invariant is None:
        return None
    return check_invariant(patch.invariant, git.root).holds


def classify(git: Git, series: Series) -> list[PatchReport]:
    """Applied (in history), upstreamed (invariant holds) or pending."""
    reports = []
    for patch in series.patches:
        if in_history(git, patch):
            reports.append(PatchReport(patch.name, "applied", "in history"))
        elif invariant_holds(git, patch):
            detail = f"invariant {patch.invariant} holds without the patch"
            reports.append(PatchReport(patch.name, "upstreamed", detail))
        else:
            reports.append(PatchReport(patch.name, "pending", files=list(patch.files)))
    return reports


def apply_series(path: Path, series: Series) -> ApplyResult:
    """Apply ``series`` to the checkout at ``path``; see the module docstring."""
    try:
        git = open_checkout(path)
        with CheckoutGuard(git, "apply") as guard:
            notes = [guard.recovered] if guard.recovered else []
            reason = refusal(git)
            if reason:
                return ApplyResult(Status.REFUSED, reason, notes=notes)
            result = _apply_locked(git, guard, series)
            result.notes[:0] = notes
            return result
    except (NotACheckoutError, BusyError) as exc:
        return ApplyResult(Status.REFUSED, str(exc))


def _apply_locked(git: Git, guard: CheckoutGuard, series: Series) -> ApplyResult:
    head = git.head()
    reports = classify(git, series)
    pending = [
        p for p, r in zip(series.patches, reports, strict=True) if r.status == "pending"
    ]
    if not pending:
        upstreamed = [r.name for r in reports if r.status == "upstreamed"]
        if len(upstreamed) == len(reports):
            return ApplyResult(
                Status.UPSTREAMED,
                "upstream already carries the whole series; nothing to apply",
                head,
                head,
                reports,
            )
        message = "the series is already applied" + (
            f" (upstream carries {', '.join(upstreamed)})" if upstreamed else ""
        )
        return ApplyResult(Status.ALREADY_APPLIED, message, head, head, reports)
    by_name = {r.name: r for r in reports}
    journal = guard.begin(head, git.branch())
    try:
        for patch in pending:
            report = by_name[patch.name]
            failure = am_one(git, patch, report)
            if failure is not None:
                restore(git, journal.head, journal.branch)
                return ApplyResult(
                    Status.CONFLICT,
                    f"{patch.name}: {failure}",
                    head,
                    git.head(),
                    reports,
                )
        git.run("update-ref", BASE_REF, head)
    except BaseException:
        restore(git, journal.head, journal.branch)
        raise
    upstreamed = [r.name for r in reports if r.status == "upstreamed"]
    return ApplyResult(
        Status.APPLIED,
        f"applied {len(pending)} patch(es)"
        + (f"; upstream already carries {', '.join(upstreamed)}" if upstreamed else ""),
        head,
        git.head(),
        reports,
    )


def am_one(git: Git, patch: Patch, report: PatchReport) -> str | None:
    """``git am -3`` one patch and check its invariant; the failure, if any.

    On failure the am is left in progress for the caller to roll back, after
    the conflicting files and hunks are recorded in ``report``.
    """
    # --keep-non-patch: plain `git am` strips every [...] group from the
    # subject, which would drop vLLM's [Bugfix][ROCm] prefixes.
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
        report.files, report.hunks = conflict_location(git)
        report.detail = _am_errors(proc) or "git am failed"
        return f"does not apply: {report.detail}" + (
            f" (conflicts in {', '.join(report.files)})" if report.files else ""
        )
    if invariant_holds(git, patch) is False:
        report.status = "conflict"
        assert patch.invariant is not None
        result = check_invariant(patch.invariant, git.root)
        report.files = list(patch.files)
        report.detail = (
            f"applied, but invariant {patch.invariant} does not hold: {result.detail}"
        )
        return report.detail
    report.status = "applied"
    report.detail = "invariant holds" if patch.invariant else ""
    return None


def _am_errors(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [
        line.strip()
        for line in (proc.stdout + proc.stderr).splitlines()
        if line.startswith(("error:", "CONFLICT", "Patch failed"))
    ]
    return "; ".join(lines[:4])


def conflict_location(git: Git) -> tuple[list[str], list[str]]:
    """Unmerged files and, in each, the line ranges of the conflict markers."""
    files = git.run(
        "diff", "--name-only", "--diff-filter=U", check=False
    ).stdout.split()
    hunks = []
    for name in files:
        start = None
        try:
            lines = (git.root / name).read_text(errors="replace").splitlines()
        except OSError:
            continue
        for number, line in enumerate(lines, 1):
            if line.startswith("<<<<<<<"):
                start = number
            elif line.startswith(">>>>>>>") and start is not None:
                hunks.append(f"{name}:{start}-{number}")
                start = None
    return files, hunks
