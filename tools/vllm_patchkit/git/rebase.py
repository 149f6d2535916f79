"""Replay the branch onto a new upstream commit; move it only on success.

Every commit between the series base (``refs/vllm-patchkit/base``, or
``--base``) and HEAD, the series' and the user's, is replayed in order in a
temporary ``git worktree`` detached at the target (docs/reference/cli.md,
``rebase``, says what is dropped, applied from its file or left out). Any
conflict leaves the branch exactly as it was; it moves only when every
commit went through. A history that cannot be replayed commit by commit is
refused before anything is touched.

A patch dropped from the branch stays in the series while older releases
in its ``Affects:`` range need it (:func:`~vllm_patchkit.git.ranges.needed_elsewhere`);
on the newest release each patch's range is judged by the target's code
(:func:`~vllm_patchkit.git.ranges.judge_ranges`) and reported, for
``refresh`` to write.

The temporary worktree lives under the git directory's ``vllm-patchkit/``
folder, locked, and is removed at the end; one a killed run left is removed
by the next rebase, which touches no other worktree.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from vllm_patchkit.errors import InputError, RefusedError
from vllm_patchkit.git.apply import (
    am_one,
    git_errors,
    invariant_failure,
    record_conflict,
)
from vllm_patchkit.git.carry import decide, read_version
from vllm_patchkit.git.checkout import (
    BASE_REF,
    PatchReport,
    PatchState,
    committer_env,
    history,
    invariant_holds,
    open_checkout,
    refusal,
)
from vllm_patchkit.git.guard import CheckoutGuard
from vllm_patchkit.git.ranges import Ranges, judge_ranges, needed_elsewhere
from vllm_patchkit.git.revs import (
    check_ref_name,
    check_repository,
    check_revision,
)
from vllm_patchkit.git.series import Patch, Series, as_commit
from vllm_patchkit.gitcmd import Git, GitError

FETCHED_REF = "refs/vllm-patchkit/fetched"
"""Where ``--upstream``'s ref lands for the run (FETCH_HEAD is the user's)."""
SCRATCH = "rebase"
"""The folder, in the git directory's vllm-patchkit/, of the temporary worktrees."""
WORKTREE_PREFIX = "vllm-patchkit-rebase-"


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
    """The series patches, in replay order."""
    commits: list[PatchReport] = field(default_factory=list)
    """The user's own commits after the base, in order (name: id and subject)."""
    notes: list[str] = field(default_factory=list)
    ranges: Ranges = field(default_factory=lambda: Ranges(None))
    """Each patch's ``Affects:`` range as the target's code says (judged on
    the newest release only); ``refresh`` on the result records it."""
    kept: list[str] = field(default_factory=list)
    """Patches dropped from the branch that the series keeps: older releases
    in their ``Affects:`` ranges need them."""


@dataclass(frozen=True)
class Step:
    """One thing to replay: a series patch (from its commit or its file) or
    one of the user's commits."""

    patch: Patch | None
    commit: str | None
    subject: str = ""
    edited: bool = False
    """The commit has the patch's subject but not its diff (amended): it is
    replayed as it is and never dropped for what upstream carries."""


def resolve_target(git: Git, onto: str, upstream: str | None) -> str:
    """The commit to rebase onto, fetched from ``upstream`` when given
    (both as :func:`rebase_series` checked them)."""
    if upstream is None:
        commit = git.commit_of(onto)
        if commit is None:
            raise InputError(f"{onto!r} is not a commit in {git.root} (use --upstream)")
        return commit
    try:
        git.run(
            # Remote helpers that run commands stay off whatever the config says.
            "-c",
            "protocol.ext.allow=never",
            "-c",
            "protocol.fd.allow=never",
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--",
            upstream,
            f"+{onto}:{FETCHED_REF}",
        )
        return git.out("rev-parse", "--verify", f"{FETCHED_REF}^{{commit}}")
    except GitError as exc:
        detail = exc.stderr.strip()
        raise InputError(f"cannot fetch {onto!r} from {upstream}: {detail}") from exc
    finally:
        git.run("update-ref", "-d", FETCHED_REF, check=False)


def rebase_series(
    path: Path,
    series: Series,
    onto: str,
    upstream: str | None = None,
    base: str | None = None,
) -> RebaseResult:
    try:
        # Checked before git runs at all: these reach git as arguments.
        if upstream is None:
            check_revision(onto, "--onto")
        else:
            check_ref_name(onto, "--onto")
            check_repository(upstream, "--upstream")
        if base is not None:
            check_revision(base, "--base")
        git = open_checkout(path)
    except RefusedError as exc:
        return RebaseResult("refused", str(exc))
    with CheckoutGuard(git, "rebase") as guard:
        notes = [guard.recovered] if guard.recovered else []
        notes += remove_leftover_worktrees(git)
        head, branch = git.head(), git.branch()
        reason = refusal(git, branch)
        if reason:
            return RebaseResult("refused", reason, notes=notes)
        try:
            steps = plan(git, series, base)
            target = resolve_target(git, onto, upstream)
        except RefusedError as exc:
            return RebaseResult("refused", str(exc), head_before=head, notes=notes)
        result = RebaseResult("rebased", "", target, head, head, branch, notes=notes)
        new_head = _replay(git, steps, target, result)
        if new_head is None:
            return result
        guard.begin(head, branch)  # a failure from here on is rolled back
        git.run("reset", "--hard", "--quiet", new_head)
        git.run("update-ref", BASE_REF, target)
        result.head_after = new_head
        result.message = _success_message(result, onto)
        return result


def plan(git: Git, series: Series, base: str | None) -> list[Step]:
    """What to replay, in order: every commit after the base, and each
    series patch with no commit here from its file at its place in the
    series; InputError when the branch cannot be replayed."""
    base_rev = base if base is not None else BASE_REF
    base_commit = git.commit_of(base_rev)
    if base_commit is None:
        raise InputError(
            f"{git.root}: no series base ({base_rev} is unknown): rebase replays "
            "the commits after it; run `vllm-patchkit apply` first, or pass --base"
        )
    below = git.run("merge-base", "--is-ancestor", base_commit, "HEAD", check=False)
    if below.returncode != 0:
        raise InputError(
            f"{git.root}: the series base {base_commit[:12]} ({base_rev}) is not "
            "below HEAD, so the commits to replay are unknown; pass --base"
        )
    merges = git.out("rev-list", "--merges", f"{base_commit}..HEAD", "--")
    if merges:
        raise InputError(
            f"{git.root}: commit {merges.split()[0][:12]} after the base is a merge; "
            "rebase replays a linear history only (rebase it by hand with git)"
        )
    listing = git.out(
        "log", "--reverse", "--format=%H %s", f"{base_commit}..HEAD", "--"
    )
    commits = [line.partition(" ")[::2] for line in listing.splitlines() if line]
    owner = _series_commits(git, series, base_commit, commits)
    by_commit = {sha: (name, edited) for name, (sha, edited) in owner.items()}
    patches = {patch.name: patch for patch in series.patches}
    steps = []
    for sha, subject in commits:
        name, edited = by_commit.get(sha, ("", False))
        steps.append(Step(patches.get(name), sha, subject, edited))
    # From its file: right after the nearest series patch before it, or first.
    for index, patch in enumerate(series.patches):
        if patch.name in owner:
            continue
        earlier = {p.name for p in series.patches[:index]}
        at = 0
        for position, step in enumerate(steps):
            if step.patch is not None and step.patch.name in earlier:
                at = position + 1
        steps.insert(at, Step(patch, None))
    return steps


def _series_commits(
    git: Git, series: Series, base: str, commits: list[tuple[str, str]]
) -> dict[str, tuple[str, bool]]:
    """Patch name -> the commit after the base that carries it, and whether
    that commit was edited.

    A commit carries a patch when its patch-id is the patch's, or, for a
    commit edited since (amended), when its subject is the patch's.
    """
    if not commits:
        return {}
    log = git.commit_diffs(f"{base}..HEAD", "--")
    # Each patch file under a made-up commit id (its position in the
    # series), so one `git patch-id` tells which patch an id belongs to.
    made_up = {f"{i + 1:040x}": p.name for i, p in enumerate(series.patches)}
    files = "".join(
        as_commit(series.directory / name, fake) for fake, name in made_up.items()
    )
    patch_of_id: dict[str, str] = {}
    id_of_commit: dict[str, str] = {}
    for pid, commit in git.patch_ids(files + log):
        if commit in made_up:
            patch_of_id.setdefault(pid, made_up[commit])
        else:
            id_of_commit[commit] = pid
    owner: dict[str, tuple[str, bool]] = {}
    for sha, subject in commits:
        name = patch_of_id.get(id_of_commit.get(sha, ""))
        edited = name is None or name in owner
        if edited:
            name = next(
                (
                    p.name
                    for p in series.patches
                    if p.subject == subject and p.name not in owner
                ),
                None,
            )
        if name is not None:
            owner[name] = (sha, edited)
    return owner


def scratch_root(git: Git) -> Path:
    return git.git_dir() / "vllm-patchkit" / SCRATCH


def remove_leftover_worktrees(git: Git) -> list[str]:
    """Remove the temporary worktrees a killed rebase left (under
    :func:`scratch_root` only: the user's own, even prunable, stay); notes
    saying so."""
    root = scratch_root(git)
    ours = [
        path
        for path in map(Path, git.worktrees())
        if path.parent == root and path.name.startswith(WORKTREE_PREFIX)
    ]
    for path in ours:
        _remove_worktree(git, path)
    leftovers = sorted(root.iterdir()) if root.is_dir() else []
    for path in leftovers:
        shutil.rmtree(path, ignore_errors=True)
    removed = sorted({p.name for p in ours} | {p.name for p in leftovers})
    if not removed:
        return []
    return [
        "removed the temporary worktree of an interrupted rebase: "
        + ", ".join(str(root / name) for name in removed)
    ]


def _remove_worktree(git: Git, tree: Path) -> None:
    """``git worktree remove`` one of ours (locked: --force twice); when its
    directory is already gone, delete its admin folder (a prune of it alone)."""
    git.run("worktree", "remove", "--force", "--force", "--", str(tree), check=False)
    common = git.out("rev-parse", "--path-format=absolute", "--git-common-dir")
    admin_root = Path(common) / "worktrees"
    if not admin_root.is_dir():
        return
    for admin in admin_root.iterdir():
        gitdir = admin / "gitdir"
        try:
            points_to = Path(gitdir.read_text().strip())
        except OSError:
            continue
        if points_to == tree / ".git":
            shutil.rmtree(admin, ignore_errors=True)
    shutil.rmtree(tree, ignore_errors=True)


def _replay(
    git: Git, steps: list[Step], target: str, result: RebaseResult
) -> str | None:
    """The new head with every step on ``target``, or None after a conflict."""
    root = scratch_root(git)
    root.mkdir(parents=True, exist_ok=True)
    tree = root / f"{WORKTREE_PREFIX}{os.getpid()}"
    try:
        git.run(
            "worktree",
            "add",
            "--quiet",
            "--detach",
            "--lock",
            "--reason",
            f"vllm-patchkit rebase (pid {os.getpid()}); the next rebase removes it",
            "--",
            str(tree),
            target,
        )
        work = Git(tree, git.extra_env)
        judged = [step.patch for step in steps if step.patch is not None]
        result.ranges = judge_ranges(judged, tree, read_version(tree), work)
        for step in steps:
            failure = _replay_step(work, step, result)
            if failure is not None:
                result.status = "conflict"
                result.message = f"{failure}; {result.branch} is unchanged"
                return None
        return work.head()
    finally:
        _remove_worktree(git, tree)
        with contextlib.suppress(OSError):
            root.rmdir()  # only when empty: nothing of ours stays behind


def _replay_step(work: Git, step: Step, result: RebaseResult) -> str | None:
    """Apply, drop or fail one step; the failure message, if any."""
    patch = step.patch
    if patch is None:
        assert step.commit is not None
        report = PatchReport(f"{step.commit[:12]} {step.subject}", "pending")
        result.commits.append(report)
        failure = _pick(work, step.commit, report)
        return f"your commit {report.name} {failure}" if failure else None
    report = PatchReport(patch.name, "pending", files=list(patch.files))
    result.patches.append(report)
    if not step.edited and (
        patch.name in history(work, [patch]).applied or invariant_holds(work, patch)
    ):
        report.status = "upstreamed"
        report.detail = "dropped: upstream carries it" + _kept(patch, result)
        return None
    version = read_version(work.root)
    # A patch the series does not carry for the target stays out of the
    # branch (and in the series: this is no drop), as apply leaves it out:
    # from its file, by the carry rule; its commit, unedited, only where the
    # target's release is trusted, so that the rule is its Affects: range
    # (code that moved or cannot be read may still need the user's fix).
    if step.commit is None or (version.trusted and not step.edited):
        carry = decide(patch, work.root, version)
        if not carry.carried:
            report.status, report.detail = PatchState.NOT_CARRIED, carry.why
            return None
    if step.commit is None:
        failure = am_one(work, patch, report)
    else:
        failure = _pick(work, step.commit, report)
        if report.status == "upstreamed":
            report.detail += _kept(patch, result)
        if failure is None:
            failure = invariant_failure(work, patch, report)
    return f"{patch.name} {failure}" if failure else None


def _kept(patch: Patch, result: RebaseResult) -> str:
    """What a patch dropped from the branch stays in the series for."""
    why = needed_elsewhere(patch)
    if why is None:
        return ""
    result.kept.append(patch.name)
    return f"; kept in the series: {why}"


def _pick(work: Git, commit: str, report: PatchReport) -> str | None:
    """Cherry-pick one commit as it is (message, author, date); the failure.

    A commit whose change the target already has ends up empty and is
    dropped (reported as such); a commit that was empty to begin with is kept.
    """
    was_empty = work.out("rev-parse", f"{commit}^{{tree}}") == work.out(
        "rev-parse", f"{commit}^^{{tree}}"
    )
    proc = work.run(
        "cherry-pick",
        "--allow-empty",
        "--keep-redundant-commits",
        "--cleanup=verbatim",
        "--no-rerere-autoupdate",
        commit,
        check=False,
        env=committer_env(work),
    )
    if proc.returncode != 0:
        detail = git_errors(proc) or "git cherry-pick failed"
        return record_conflict(work, report, detail)
    if not was_empty and work.out("rev-parse", "HEAD^{tree}") == work.out(
        "rev-parse", "HEAD~^{tree}"
    ):
        work.run("reset", "--hard", "--quiet", "HEAD~")
        report.status = "upstreamed"
        report.detail = "dropped: the target already has this change"
        return None
    report.status = "applied"
    return None


def _success_message(result: RebaseResult, onto: str) -> str:
    applied = sum(p.status == "applied" for p in result.patches)
    mine = sum(c.status == "applied" for c in result.commits)
    text = f"{result.branch} now has {applied} patch(es)"
    if result.commits:
        text += f" and {mine} of your commit(s)"
    text += f" on {onto}"
    dropped = [p.name for p in result.patches if p.status == "upstreamed"]
    if dropped:
        text += f"; dropped as upstreamed: {', '.join(dropped)}"
    if result.kept:
        text += (
            f" (from the branch; the series keeps {', '.join(result.kept)} for "
            "the older releases in its Affects:)"
        )
    if result.ranges.changes:
        moved = ", ".join(
            f"{j.name} Affects: {j.affects} -> {j.new_affects}"
            + (
                f" (Applied-Upstream: {j.applied_upstream})"
                if j.applied_upstream
                else ""
            )
            for j in result.ranges.changes
        )
        text += f"; ranges the code moves (refresh records them): {moved}"
    skipped = [p.name for p in result.patches if p.status == "not-carried"]
    if skipped:
        text += (
            f"; not carried for {onto}'s release (left out of the branch, kept in "
            f"the series): {', '.join(skipped)}"
        )
    gone = [c.name for c in result.commits if c.status == "upstreamed"]
    if gone:
        text += f"; your commit(s) already in {onto}, dropped: {', '.join(gone)}"
    return text
