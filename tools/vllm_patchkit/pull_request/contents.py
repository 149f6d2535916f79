"""Which series patch each of a checkout's commits carries, read by content.

A pull request sends one fix's commits, so they must be found by what they
change: a contributor rewords a subject, squashes a fixup into a commit,
drops or reverts one. A commit carries a patch when it has the patch's
stable patch-id (the history apply and check read:
:func:`~vllm_patchkit.git.checkout.history`); else, where its text differs
(edited, replayed on other context), when it touches the patch's files and
the patch's invariant holds after it and not before. A commit after which
the invariant no longer holds undoes the patch: it is the fix's too, so a
pull request that would send it is found without the fix
(:func:`missing_patches`), never sent as if it had it.

The trees read are the checkout's files as links, with the files that
differ laid over them from a scratch index (:class:`TrialTree`); new
objects go to a scratch directory: nothing is written to the checkout or
under ``.git``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from vllm_patchkit.errors import RefusedError
from vllm_patchkit.git.carry import decide, read_version
from vllm_patchkit.git.checkout import history, scratch_env
from vllm_patchkit.git.code_readings import known_tree
from vllm_patchkit.git.invariants import check_invariant
from vllm_patchkit.git.series import Patch, Series
from vllm_patchkit.git.trial_tree import TrialTree
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.paths import memory_scratch
from vllm_patchkit.pull_request.signoff import SeriesCommit

BY_PATCH_ID = "its patch-id"
BY_INVARIANT = "its files and invariant"
UNDOES = "undoes it"


@dataclass(frozen=True)
class Carrier:
    """The series patch a commit carries, and how that was found."""

    patch: str
    how: str
    """:data:`BY_PATCH_ID`, :data:`BY_INVARIANT` or :data:`UNDOES`."""

    @property
    def undoes(self) -> bool:
        return self.how == UNDOES


class NotReplayableError(RefusedError):
    """A commit's change does not apply without the commits between."""


def patch_carriers(
    git: Git, commits: Sequence[SeriesCommit], series: Series
) -> dict[str, Carrier]:
    """The patch each of ``commits`` carries (or undoes), by commit id;
    a commit that is no series patch's is absent."""
    found = history(git, list(series.patches))
    ours = {commit.sha for commit in commits}
    carriers: dict[str, Carrier] = {}
    for patch in series.patches:
        for sha in found.carriers.get(patch.name, set()) & ours:
            carriers.setdefault(sha, Carrier(patch.name, BY_PATCH_ID))
    ruled = [patch for patch in series.patches if patch.invariant is not None]
    for commit in commits:
        if commit.sha in carriers:
            continue
        touched = set(changed_files(git, f"{commit.sha}^", commit.sha))
        candidates = [p for p in ruled if touched & set(p.files)]
        if not candidates:
            continue
        names = [p.invariant for p in candidates if p.invariant]
        before = _holding(git, f"{commit.sha}^", names)
        after = _holding(git, commit.sha, names)
        for patch in candidates:
            name = patch.invariant or ""
            if after[name] != before[name]:
                how = BY_INVARIANT if after[name] else UNDOES
                carriers[commit.sha] = Carrier(patch.name, how)
                break
    return carriers


def missing_patches(
    git: Git,
    base: str,
    commits: Sequence[SeriesCommit],
    patches: Sequence[Patch],
    carriers: Mapping[str, Carrier],
) -> list[str]:
    """Each of ``patches`` that ``base`` plus ``commits`` lacks, with why.

    A patch counts where the series carries it for the tree, or upstream
    does (:func:`vllm_patchkit.git.carry.decide`, the rule ``test`` counts
    fixes by); it is there when its invariant holds on that tree, or, for a
    patch that declares none, when a commit sent has its patch-id.
    """
    version = read_version(git.root)
    by_id = {
        carriers[c.sha].patch
        for c in commits
        if c.sha in carriers and carriers[c.sha].how == BY_PATCH_ID
    }
    missing = []
    with content_tree(git, base, [commit.sha for commit in commits]) as tree:
        for patch in patches:
            carry = decide(patch, tree, version)
            if not (carry.carried or carry.fixed):
                continue  # not this release's patch
            if patch.invariant is None:
                if patch.name not in by_id:
                    missing.append(
                        f"{patch.name} (no commit sent has its patch-id, and it "
                        "declares no invariant to read it by)"
                    )
                continue
            result = check_invariant(patch.invariant, tree)
            if not result.holds:
                missing.append(
                    f"{patch.name} (its invariant {patch.invariant} does not "
                    f"hold there: {in_tree(result.detail, tree)})"
                )
    return missing


def with_earlier_patches(
    commits: Sequence[SeriesCommit],
    sent: Sequence[SeriesCommit],
    series: Series,
    patches: Sequence[str],
    carriers: Mapping[str, Carrier],
) -> list[SeriesCommit]:
    """``sent`` and, of ``commits``, those carrying a patch the series puts
    before ``patches`` (another fix's), in history order: a patch's
    invariant is read on the tree the series makes for it, as apply reads it
    after ``git am`` (0003's reads 0001's change too, on 0.28.0)."""
    order = {patch.name: index for index, patch in enumerate(series.patches)}
    first = min((order[name] for name in patches if name in order), default=0)
    mine = {commit.sha for commit in sent}

    def earlier(commit: SeriesCommit) -> bool:
        carrier = carriers.get(commit.sha)
        return (
            carrier is not None
            and not carrier.undoes
            and order.get(carrier.patch, first) < first
        )

    return [c for c in commits if c.sha in mine or earlier(c)]


def in_tree(text: str, root: Path) -> str:
    """``text`` with ``root``'s path as ``.``: a PR names no path of the
    machine it was made on."""
    return text.replace(f"{root}/", "").replace(str(root), ".")


def changed_files(git: Git, old: str, new: str) -> list[str]:
    """The paths that differ between two commits (a rename: both)."""
    out = git.run("diff", "--name-only", "-z", "--no-renames", old, new).stdout
    return [name for name in out.split("\0") if name]


def _holding(git: Git, rev: str, invariants: list[str]) -> dict[str, bool]:
    with content_tree(git, rev) as tree:
        return {name: check_invariant(name, tree).holds for name in invariants}


@contextmanager
def content_tree(git: Git, base: str, commits: Sequence[str] = ()) -> Iterator[Path]:
    """A tree holding ``base`` with each of ``commits``' own changes
    replayed on it in turn, for reading; its readings are kept by content."""
    with tempfile.TemporaryDirectory(
        prefix="vllm-patchkit-pr-", dir=memory_scratch()
    ) as scratch:
        env = scratch_env(git, Path(scratch))
        tree = git.out("rev-parse", f"{base}^{{tree}}")
        if commits and _chain(git, base, commits):
            tree = git.out("rev-parse", f"{commits[-1]}^{{tree}}")
        else:
            for sha in commits:
                tree = replayed_tree(git, tree, sha, env)
        git.run("read-tree", tree, env=env, hooks=False)
        listing = git.run(
            "diff-index", "--cached", "--name-only", "-z", "--no-renames", "HEAD",
            env=env,
        ).stdout  # fmt: skip
        paths = [name for name in listing.split("\0") if name]
        root = git.root
        if paths:  # else the checkout (clean: HEAD's tree) is that tree
            trial = TrialTree(git, Path(scratch))
            trial.take_from_index(paths, env)
            root = trial.root
        with known_tree(root, tree):
            yield root


def replayed_tree(git: Git, parent: str, sha: str, env: Mapping[str, str]) -> str:
    """The tree of ``sha``'s own change applied to ``parent`` (a commit or
    a tree), in the index ``env`` names."""
    diff = git.run("diff", "--binary", "--full-index", f"{sha}^", sha).stdout
    git.run("read-tree", parent, env=dict(env), hooks=False)
    if diff.strip():  # git apply takes no empty patch
        applied = git.run(
            "apply", "--cached", "-", input_text=diff, env=dict(env), check=False,
            hooks=False,
        )  # fmt: skip
        if applied.returncode != 0:
            raise NotReplayableError(
                f"{sha[:12]} does not apply to the base without the commits "
                f"between: {applied.stderr.strip()}"
            )
    return git.run("write-tree", env=dict(env)).stdout.strip()


def _chain(git: Git, base: str, commits: Sequence[str]) -> bool:
    """``commits`` are ``base``'s descendants one after another (then the
    last one's tree is the replay's)."""
    parents = git.out("show", "-s", "--format=%P", *commits).splitlines()
    expected = [git.out("rev-parse", f"{base}^{{commit}}"), *commits[:-1]]
    return [line.split()[0] if line else "" for line in parents] == expected
