"""Replay the series onto a new upstream commit; move the branch only on success.

The replay happens in a temporary ``git worktree`` detached at the target:
each patch is applied (``git am -3`` plus its invariant), dropped because
upstream carries it, or stops the run with a report naming the patch, the
files and the conflicting hunks. The user's branch moves to the new commits
only when the whole series went through.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from vllm_patchkit.apply import am_one
from vllm_patchkit.checkout import (
    BASE_REF,
    PatchReport,
    in_history,
    invariant_holds,
    open_checkout,
    refusal,
)
from vllm_patchkit.gitcmd import Git, GitError
from vllm_patchkit.guard import CheckoutGuard, restore
from vllm_patchkit.series import Series


@dataclass
class RebaseResult:
    status: str
    """rebased, conflict, refused or error."""
    message: str
    onto: str | None = None
    head_before: str | None = None
    head_after: str | None = None
    branch: str | None = None
    patches: list[PatchReport] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def dropped(self) -> list[str]:
        return [p.name for p in self.patches if p.status == "upstreamed"]


def resolve_target(git: Git, onto: str, upstream: str | None) -> str:
    """The commit to rebase onto, fetched from ``upstream`` when given."""
    if onto.startswith("-"):
        # git would read it as an option (--upload-pack=... runs a command).
        raise ValueError(f"{onto!r} is not a ref name")
    if upstream is not None:
        try:
            git.run("fetch", "--quiet", "--no-tags", upstream, onto)
        except GitError as exc:
            detail = exc.stderr.strip()
            raise ValueError(
                f"cannot fetch {onto!r} from {upstream}: {detail}"
            ) from exc
        return git.out("rev-parse", "FETCH_HEAD^{commit}")
    commit = git.commit_of(onto)
    if commit is None:
        raise ValueError(f"{onto!r} is not a commit in {git.root} (use --upstream)")
    return commit


def rebase_series(
    path: Path, series: Series, onto: str, upstream: str | None = None
) -> RebaseResult:
    try:
        git = open_checkout(path)
    except ValueError as exc:
        return RebaseResult("refused", str(exc))
    with CheckoutGuard(git, "rebase") as guard:
        notes = [guard.recovered] if guard.recovered else []
        reason = refusal(git)
        if reason:
            return RebaseResult("refused", reason, notes=notes)
        try:
            target = resolve_target(git, onto, upstream)
        except ValueError as exc:
            return RebaseResult("refused", str(exc), notes=notes)
        head, branch = git.head(), git.branch()
        result = RebaseResult("rebased", "", target, head, head, branch, notes=notes)
        new_head = _replay(git, series, target, result)
        if new_head is None:
            return result
        journal = guard.begin()
        try:
            git.run("reset", "--hard", "--quiet", new_head)
            git.run("update-ref", BASE_REF, target)
        except BaseException:
            restore(git, journal.head, journal.branch)
            raise
        result.head_after = new_head
        applied = sum(p.status == "applied" for p in result.patches)
        result.message = f"{branch} now has {applied} patch(es) on {onto}" + (
            f"; dropped as upstreamed: {', '.join(result.dropped)}"
            if result.dropped
            else ""
        )
        return result


def _replay(git: Git, series: Series, target: str, result: RebaseResult) -> str | None:
    """The new head with the series on ``target``, or None after a conflict."""
    scratch = Path(tempfile.mkdtemp(prefix="vllm-patchkit-rebase-"))
    tree = scratch / "tree"
    git.run("worktree", "add", "--quiet", "--detach", str(tree), target)
    try:
        work = Git(tree)
        for patch in series.patches:
            report = PatchReport(patch.name, "pending", files=list(patch.files))
            result.patches.append(report)
            if in_history(work, patch) or invariant_holds(work, patch):
                report.status = "upstreamed"
                report.detail = "dropped: upstream carries it"
                continue
            failure = am_one(work, patch, report)
            if failure is not None:
                result.status = "conflict"
                result.message = f"{patch.name} {failure}; {result.branch} is unchanged"
                return None
        return work.head()
    finally:
        git.run("worktree", "remove", "--force", str(tree), check=False)
        git.run("worktree", "prune", check=False)
        shutil.rmtree(scratch, ignore_errors=True)


def markdown_summary(result: RebaseResult, onto: str) -> str:
    """A step summary for CI: one table row per patch."""
    lines = [
        f"## vllm-patchkit rebase onto `{onto}`: {result.status}",
        "",
        result.message,
        "",
        "| patch | result | detail |",
        "| --- | --- | --- |",
    ]
    for patch in result.patches:
        detail = patch.detail.replace("|", "\\|")
        if patch.hunks:
            detail += " (hunks: " + ", ".join(patch.hunks) + ")"
        lines.append(f"| `{patch.name}` | {patch.status} | {detail} |")
    return "\n".join(lines) + "\n"
