"""The main job: show the bug on real vLLM code, apply the series, show it fixed.

With no checkout given, it works on a clone of the cached vLLM 0.28.0
release tree. Given a user's checkout, it runs the "before" scenarios on it
read-only, applies the series in a temporary git worktree, and keeps the
result as a new branch; the user's branch and files are never touched.

The verdict is ``test``'s (:func:`vllm_patchkit.judge.verify.judge_tree`) on the
tree the answer is about: the suite with the tree's upstream test, over the
fixes the series carries for its release (a fix not carried there is shown
and decides nothing); FIXED needs the core checks to have run there, and
every check that could not run is counted and named.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from vllm_patchkit import progress
from vllm_patchkit.errors import InputError
from vllm_patchkit.git.apply import ApplyResult, Status, apply_series
from vllm_patchkit.git.checkout import NotACheckoutError, dirty_reason, open_checkout
from vllm_patchkit.git.owned_dirs import claim_dir, record, remove_owned
from vllm_patchkit.git.revs import check_ref_name
from vllm_patchkit.git.series import Series
from vllm_patchkit.judge.regression.runner import TreeReport, run_scenarios
from vllm_patchkit.judge.verify import TreeRun, judge_tree
from vllm_patchkit.judgement import Judgement, Verdict
from vllm_patchkit.paths import cache_dir
from vllm_patchkit.trees.releases import clone_release

DEFAULT_VERSION = "0.28.0"
"""The newest release that needs every fix: the one the series is made on."""
DEFAULT_BRANCH = "vllm-overlay/series"


UNCHANGED = frozenset({Status.UPSTREAMED, Status.ALREADY_APPLIED, Status.NOT_CARRIED})
"""Apply outcomes that leave the tree as it was: the stock tree is the answer."""


class DemoInputError(InputError):
    """The given checkout cannot be used; nothing was changed."""


@dataclass
class DemoResult:
    tree: Path
    origin: str
    before: TreeReport
    apply: ApplyResult
    after: TreeReport | None
    judged: TreeRun | None = None
    """``test``'s run of the tree the verdict is about: the patched tree, or
    the stock one when upstream already carries the series; None when the
    series did not apply."""
    branch: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def judgement(self) -> Judgement:
        """``test``'s judgement of the judged tree; with none (the series
        does not apply), not fixed on a conflict, else cannot judge."""
        if self.judged is not None:
            return self.judged.judgement()
        why = f"the series did not apply ({self.apply.status})"
        if self.apply.status is Status.CONFLICT:
            return Judgement(Verdict.NOT_FIXED, why)
        return Judgement(Verdict.CANNOT_JUDGE, why)


def _judge(
    series: Series,
    stock: Path,
    patched: Path,
    applied: ApplyResult,
    before: TreeReport,
    after: TreeReport | None,
) -> TreeRun | None:
    """``test``'s run of the tree the answer is about (see DemoResult.judged):
    the patched tree, or the stock one when the series leaves it as it is
    (upstreamed, already applied, not carried for its release): ``test`` on
    that tree gives the same answer."""
    if applied.status in UNCHANGED:
        return judge_tree(stock, series, before)
    if after is None:
        return None
    return judge_tree(patched, series, after)


CLONE = "the demo's release clone"


def release_clone(workdir: Path | None, version: str) -> Path:
    """A fresh clone of the cached release tree at ``workdir/vllm-VERSION``,
    recorded as the toolkit's. A ``workdir`` the user gave must be new,
    empty or one the toolkit made (the default is the cache's ``demo/``); a
    clone already there is replaced only while it is the toolkit's and
    holds nothing it did not make. Refusals come before anything changes."""
    if workdir is None:
        workdir = cache_dir() / "demo"
    else:
        claim_dir(workdir, "--workdir")
    tree = workdir / f"vllm-{version}"
    progress.step(f"demo 1/4: a fresh clone of the vLLM {version} release tree")
    # A previous run's clone: thousands of files, tens of seconds on a busy disk.
    with progress.phase(f"removing the previous demo clone {tree}"):
        remove_owned(tree, CLONE)
    clone_release(version, tree)
    record(tree, CLONE)
    return tree


def run_release_demo(
    series: Series, workdir: Path | None, version: str = DEFAULT_VERSION
) -> DemoResult:
    """Demo on a fresh clone of the cached release tree under ``workdir``
    (None: the cache)."""
    tree = release_clone(workdir, version)
    try:
        progress.step("demo 2/4: before: the scenarios on the stock tree")
        before = run_scenarios(tree)
        progress.step("demo 3/4: applying the series (git am -3)")
        applied = apply_series(tree, series)
        progress.step("demo 4/4: after: the scenarios and upstream tests, patched")
        after = run_scenarios(tree) if applied.status is Status.APPLIED else None
        judged = _judge(series, tree, tree, applied, before, after)
    finally:
        # What the runs left (the series' commits, caches) is the toolkit's.
        with contextlib.suppress(Exception):
            record(tree, CLONE)
    return DemoResult(
        tree, f"vLLM {version} release tree (cached)", before, applied, after, judged
    )


def run_checkout_demo(
    series: Series, checkout: Path, branch: str = DEFAULT_BRANCH
) -> DemoResult:
    """Demo on a user's checkout; the fixed tree is left on ``branch``."""
    check_ref_name(branch, "--branch")
    try:
        git = open_checkout(checkout)
    except NotACheckoutError as exc:
        raise DemoInputError(str(exc)) from exc
    reason = dirty_reason(git)
    if reason:
        raise DemoInputError(
            f"{checkout}: refusing a dirty checkout ({reason}); commit or stash first"
        )
    if git.commit_of(f"refs/heads/{branch}") is not None:
        raise DemoInputError(
            f"{checkout}: branch {branch!r} already exists; delete it or pass --branch"
        )
    progress.step(f"demo 1/3: before: the scenarios on {git.root} (read-only)")
    before = run_scenarios(git.root)
    scratch = Path(tempfile.mkdtemp(prefix="vllm-overlay-demo-"))
    worktree = scratch / "tree"
    # A worktree on the new branch: the series goes in there, and the user's
    # own work tree, index and branch never change.
    git.run("worktree", "add", "--quiet", "-b", branch, str(worktree), "HEAD")
    kept = None
    try:
        progress.step(f"demo 2/3: applying the series on branch {branch}")
        applied = apply_series(worktree, series)
        after = None
        progress.step("demo 3/3: after: the scenarios and upstream tests, patched")
        if applied.status is Status.APPLIED:
            after = run_scenarios(worktree)
            kept = branch
        # Judged before the worktree goes: the upstream test runs there.
        judged = _judge(series, git.root, worktree, applied, before, after)
    finally:
        git.run("worktree", "remove", "--force", str(worktree), check=False)
        git.run("worktree", "prune", check=False)
        shutil.rmtree(scratch, ignore_errors=True)
        if kept is None:
            git.run("branch", "-D", branch, check=False)
    result = DemoResult(
        git.root, f"checkout {git.root}", before, applied, after, judged, kept
    )
    if kept:
        result.notes.append(
            f"the patched tree is on branch {kept} (git switch {kept}); "
            "your branch and files are unchanged"
        )
    return result
