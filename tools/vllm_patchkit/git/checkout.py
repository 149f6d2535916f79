"""A user's vLLM checkout: open it, say why not to touch it, classify patches.

Every command that reads or changes a checkout starts here. The state of a
patch in a checkout is decided by :func:`classify` alone and named by
:class:`PatchState` alone, so apply, check, doctor and matrix speak one
vocabulary. Classifying writes nothing anywhere under ``.git``: applicability
is tried against a scratch index whose new objects go to a temporary object
directory (the repository's own is only read, as an alternate).
"""

from __future__ import annotations

import enum
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from vllm_patchkit.errors import RefusedError
from vllm_patchkit.git.carry import (
    Carry,
    TreeVersion,
    decide,
    read_version,
)
from vllm_patchkit.git.code_readings import known_tree
from vllm_patchkit.git.invariants import check_invariant
from vllm_patchkit.git.recent_diffs import recent_diffs
from vllm_patchkit.git.replay import Contents, replay
from vllm_patchkit.git.series import Patch, Series, as_commit
from vllm_patchkit.git.trial_tree import TrialTree
from vllm_patchkit.gitcmd import TOOL_IDENTITY, Git
from vllm_patchkit.paths import memory_scratch

BASE_REF = "refs/vllm-patchkit/base"
"""The upstream commit the series sits on: written by apply and rebase, read
by refresh."""


class PatchState(enum.StrEnum):
    """The state of one patch in one tree; the only words reports use for it."""

    APPLIED = "applied"
    """A commit in its history has the patch's patch-id (or, outside git,
    the patch reverses cleanly)."""
    UPSTREAMED = "upstreamed"
    """Not applied, but its invariant holds without it: upstream carries it."""
    NOT_CARRIED = "not-carried"
    """Neither, and the series does not carry the patch for this tree
    (skipped, not a failure: :func:`vllm_patchkit.git.carry.decide`), or
    the user skipped it (``apply --skip``)."""
    APPLIES = "applies"
    """Neither; it applies on top of the patches before it (cleanly or with a
    3-way merge)."""
    CONFLICT = "conflict"
    """Neither; it does not apply here."""


@dataclass
class PatchReport:
    name: str
    status: str
    """A :class:`PatchState`."""
    detail: str = ""
    files: list[str] = field(default_factory=list)
    hunks: list[str] = field(default_factory=list)
    carry: str = ""
    """Why the series carries the patch here although the tree's version
    says otherwise (the code decided: :func:`vllm_patchkit.git.carry.decide`)."""


class NotACheckoutError(RefusedError, ValueError):
    """The path is not a vLLM git checkout the tool can work on."""


IN_PROGRESS = {
    "rebase-apply": "a git am or rebase",
    "rebase-merge": "a git rebase",
    "MERGE_HEAD": "a git merge",
    "CHERRY_PICK_HEAD": "a git cherry-pick",
    "REVERT_HEAD": "a git revert",
    "BISECT_LOG": "a git bisect",
}


def open_checkout(path: Path) -> Git:
    """The git work tree at ``path``; raise NotACheckoutError otherwise."""
    path = path.resolve()
    if not path.is_dir():
        raise NotACheckoutError(f"{path}: no such directory")
    git = Git(path)
    # One rev-parse for the common case; the calls below explain a failure.
    proc = git.run(
        "rev-parse",
        "--show-toplevel",
        "--absolute-git-dir",
        "--path-format=absolute",
        "--git-path",
        "objects",
        "HEAD",
        check=False,
    )
    if proc.returncode == 0:
        top, git_dir, objects, _ = proc.stdout.splitlines()
        git.set_git_dir(Path(git_dir), Path(objects))
    else:
        top = git.toplevel()
    if top is None:
        raise NotACheckoutError(f"{path}: not a git checkout")
    if Path(top) != path:
        raise NotACheckoutError(f"{path}: not the top of its git checkout ({top})")
    if not (path / "vllm" / "__init__.py").is_file():
        raise NotACheckoutError(f"{path}: a git checkout, but not of vLLM (no vllm/)")
    # The first rev-parse named HEAD: when it succeeded, there is a commit.
    if proc.returncode and git.commit_of("HEAD") is None:
        raise NotACheckoutError(f"{path}: the checkout has no commits")
    return git


def dirty_reason(git: Git) -> str | None:
    names = git.changed_paths()
    if not names:
        return None
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return f"uncommitted changes or untracked files: {', '.join(names[:5])}{more}"


def busy_reason(git: Git) -> str | None:
    """A git operation the user has in progress (not one of ours)."""
    git_dir = git.git_dir()
    for name, what in IN_PROGRESS.items():
        if (git_dir / name).exists():
            return f"{what} is in progress; finish or abort it first"
    return None


def refusal(git: Git, branch: str | None) -> str | None:
    """Why a run that changes this checkout, on ``branch`` (None: detached),
    must not start, if it must not."""
    reason = busy_reason(git) or dirty_reason(git)
    if reason:
        return f"{git.root}: refusing: {reason}"
    if branch is None:
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


@dataclass
class History:
    """What :func:`history` found for a list of patches."""

    patch_ids: dict[str, str]
    """Each patch's stable patch-id, by name (the journal records them)."""
    applied: set[str]
    """The patches a recent commit touching their files has the patch-id of."""
    carriers: dict[str, set[str]] = field(default_factory=dict)
    """Those commits, by patch name (``pr`` sends a fix's commits by them)."""


def history(git: Git, patches: list[Patch], limit: int = 200) -> History:
    """Each patch's patch-id, and whether one of the last ``limit`` commits
    touching its files (:func:`~vllm_patchkit.git.recent_diffs.recent_diffs`)
    carries it: one ``git patch-id`` for all, each patch's own mail under a
    marker commit id, so that the output splits back into patches."""
    found = History({}, set())
    if not patches:
        return found
    recent = recent_diffs(git, patches, limit)
    chunks, markers = [], {}
    for number, patch in enumerate(patches):
        marker = f"{number + 1:040x}"
        markers[marker] = patch.name
        chunks.append(as_commit(patch.path, marker))
        chunks.append(recent[patch.name])
    current = None
    for pid, commit in git.patch_ids("".join(chunks)):
        if commit in markers:
            current = markers[commit]
            found.patch_ids[current] = pid
        elif current is not None and found.patch_ids[current] == pid:
            found.applied.add(current)
            found.carriers.setdefault(current, set()).add(commit)
    return found


def invariant_holds(git: Git, patch: Patch) -> bool | None:
    """None when the patch declares no invariant."""
    if patch.invariant is None:
        return None
    return check_invariant(patch.invariant, git.root).holds


def carry_of(
    patch: Patch, root: Path, version: TreeVersion, skip: frozenset[str] = frozenset()
) -> Carry:
    """:func:`vllm_patchkit.git.carry.decide`, unless the user skips ``patch``."""
    if patch.name in skip:
        return Carry(False, SKIPPED_BY_USER)
    return decide(patch, root, version)


SKIPPED_BY_USER = "skipped by the user (--skip)"


def classify(
    git: Git, series: Series, skip: frozenset[str] = frozenset()
) -> list[PatchReport]:
    """Every patch's :class:`PatchState` in the checkout, reading only: in
    order applied, upstreamed, not carried, else tried on a scratch index
    holding HEAD and the patches before it."""
    return classify_with_history(git, series, skip=skip)[0]


def classify_with_history(
    git: Git,
    series: Series,
    *,
    try_apply: bool = True,
    skip: frozenset[str] = frozenset(),
) -> tuple[list[PatchReport], History]:
    """:func:`classify`, and the :class:`History` it read on the way.

    ``try_apply=False`` leaves a patch to try as :attr:`PatchState.APPLIES`
    with the detail ``UNTRIED``: apply tries it with ``git am`` anyway, and
    asks :func:`classify` only when that fails. ``skip``: patch names the
    user skips (``apply --skip``).
    """
    reports: list[PatchReport] = []
    version = read_version(git.root)
    found = history(git, list(series.patches))
    to_try: dict[int, Patch] = {}
    for patch in series.patches:
        if patch.name in found.applied:
            reports.append(PatchReport(patch.name, PatchState.APPLIED, "in history"))
        elif invariant_holds(git, patch):
            detail = f"invariant {patch.invariant} holds without the patch"
            reports.append(PatchReport(patch.name, PatchState.UPSTREAMED, detail))
        elif not (carry := carry_of(patch, git.root, version, skip)).carried:
            reports.append(PatchReport(patch.name, PatchState.NOT_CARRIED, carry.why))
        else:
            to_try[len(reports)] = patch
            files = list(patch.files)
            reports.append(
                PatchReport(
                    patch.name, PatchState.APPLIES, UNTRIED, files, carry=carry.why
                )
            )
    if try_apply and to_try:
        tried = _try_in_order(git, list(to_try.values()))
        for index, (state, detail) in zip(to_try, tried, strict=True):
            reports[index].status, reports[index].detail = state, detail
    return reports, found


def _try_in_order(git: Git, patches: list[Patch]) -> list[tuple[PatchState, str]]:
    """Each patch tried as ``apply`` would take it, on a scratch index
    holding HEAD and the patches before it, its invariant then read on a
    :class:`TrialTree` (``apply`` checks it after ``git am``: one that would
    not hold there is a conflict here too).

    One ``git apply --cached`` of all of them first (it writes the index
    only if each applies cleanly on those before); each patch's files are
    then git's result where no other patch touches them, else the replay's
    (:func:`~vllm_patchkit.git.replay.replay`). Otherwise they are tried one
    by one (``--3way`` for those that need it)."""
    with tempfile.TemporaryDirectory(
        prefix="vllm-patchkit-classify-", dir=memory_scratch()
    ) as scratch:
        env = scratch_env(git, Path(scratch))
        trial = TrialTree(git, Path(scratch))
        files = {name for p in patches for name in p.files}
        head = _seed_index(git, files, env)
        if len(patches) > 1:
            tried = _try_together(git, patches, files, head, trial, env)
            if tried is not None:
                return tried
        tried = []
        for patch in patches:
            state, detail = _try_apply(git, patch.path, env)
            if state is PatchState.APPLIES and patch.invariant is not None:
                trial.take_from_index(list(patch.files), env)
                broken = trial.broken(patch.invariant)
                if broken is not None:
                    state, detail = PatchState.CONFLICT, broken
            tried.append((state, detail))
        return tried


def _try_together(
    git: Git,
    patches: list[Patch],
    files: set[str],
    head: dict[str, str],
    trial: TrialTree,
    env: dict[str, str],
) -> list[tuple[PatchState, str]] | None:
    """:func:`_try_in_order`'s one ``git apply --cached`` of every patch,
    or None where it does not settle them all (``env`` then names a fresh
    scratch index)."""
    paths = [str(p.path) for p in patches]
    together = git.run("apply", "--cached", *paths, check=False, env=env, hooks=False)
    if together.returncode != 0:
        return None
    clean = (PatchState.APPLIES, "applies cleanly")
    if not any(p.invariant for p in patches):
        return [clean] * len(patches)
    trial.stage(sorted(files), env)
    if _disjoint(patches):
        # Each file's content after all of them is its content after its own.
        replayed = None
    else:
        replayed = replay(patches, head, git.root)
        final: Contents = {}
        for step in replayed or ():
            final.update(step)
        if replayed is None or final != trial.staged(list(final)):
            # The scratch index holds every patch: a fresh one, as it was.
            env["GIT_INDEX_FILE"] += "-each"
            _seed_index(git, files, env)
            return None
    tried = []
    for index, patch in enumerate(patches):
        if replayed is None:
            trial.take_staged(list(patch.files))
        else:
            trial.take(replayed[index])
        broken = patch.invariant and trial.broken(patch.invariant)
        tried.append((PatchState.CONFLICT, broken) if broken else clean)
    return tried


def _disjoint(patches: list[Patch]) -> bool:
    """No file is touched by two of ``patches``."""
    files = [name for patch in patches for name in set(patch.files)]
    return len(files) == len(set(files))


UNTRIED = "not tried before git am"


def _seed_index(git: Git, paths: set[str], env: dict[str, str]) -> dict[str, str]:
    """Fill the scratch index with HEAD's entries that decide ``paths``, and
    give HEAD's blob id of each of ``paths`` that is a file there.

    ``git apply --cached`` reads no others: the entries at and under each
    path, and any file or submodule at one of its parent directories (a
    file/directory conflict). Reading all of HEAD instead (6,600 entries on
    vLLM) was check's costliest step. One ``ls-tree -r -t`` lists the
    entries and every parent that is a directory; a second asks for the
    other parents.
    """
    literal = {"GIT_LITERAL_PATHSPECS": "1"}
    listing = git.run(
        "ls-tree",
        "-r",
        "-t",
        "-z",
        "--full-tree",
        "HEAD",
        "--",
        *sorted(paths),
        env=literal,
    ).stdout
    entries = [entry for entry in listing.split("\0") if entry]
    trees = {e.split("\t", 1)[1] for e in entries if e.split(" ", 2)[1] == "tree"}
    kept = [entry for entry in entries if entry.split(" ", 2)[1] != "tree"]
    parents = {str(d) for name in paths for d in PurePosixPath(name).parents}
    parents -= {".", *paths, *trees}
    if parents:
        # Without -r: a parent that is a directory is one tree entry (not
        # kept), not all of its files.
        above = git.run(
            "ls-tree", "-z", "--full-tree", "HEAD", "--", *sorted(parents), env=literal
        ).stdout
        kept += [e for e in above.split("\0") if e and e.split(" ", 2)[1] != "tree"]
    git.run(
        "update-index",
        "-z",
        "--index-info",
        input_text="".join(f"{entry}\0" for entry in kept),
        env=env,
        hooks=False,
    )
    blobs = (entry.split("\t", 1) for entry in kept)
    return {
        name: meta.split(" ")[2]
        for meta, name in blobs
        if name in paths and meta.split(" ")[1] == "blob"
    }


def scratch_env(git: Git, scratch: Path) -> dict[str, str]:
    """An index and an object directory in ``scratch``; the repository's
    objects are read through an alternate, never written. Commands that
    write that index run with ``hooks=False``: the user's
    ``post-index-change`` hook is for the checkout's own index."""
    objects = scratch / "objects"
    objects.mkdir()
    alternates = [str(git.objects_dir())]
    inherited = os.environ.get("GIT_ALTERNATE_OBJECT_DIRECTORIES")
    if inherited:
        alternates.append(inherited)
    return {
        "GIT_INDEX_FILE": str(scratch / "index"),
        "GIT_OBJECT_DIRECTORY": str(objects),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": os.pathsep.join(alternates),
    }


def _try_apply(git: Git, patch: Path, env: dict[str, str]) -> tuple[PatchState, str]:
    clean = git.run("apply", "--cached", str(patch), check=False, env=env, hooks=False)
    if clean.returncode == 0:
        return PatchState.APPLIES, "applies cleanly"
    merged = git.run(
        "apply", "--cached", "--3way", str(patch), check=False, env=env, hooks=False
    )
    if merged.returncode == 0:
        return PatchState.APPLIES, "applies with a 3-way merge"
    errors = [
        line for line in (merged.stderr or clean.stderr).splitlines() if line.strip()
    ]
    return PatchState.CONFLICT, "; ".join(errors[:3]) or "does not apply"


def classify_path(root: Path, series: Series) -> list[PatchReport]:
    """Every patch's :class:`PatchState` in whatever tree ``root`` is: a
    clean git checkout by :func:`classify` (its history says what is
    applied), any other tree by its files (:func:`classify_tree`)."""
    try:
        git = open_checkout(root)
    except NotACheckoutError:
        return classify_tree(root, series)
    if dirty_reason(git) is not None:
        return classify_tree(root, series)
    # Clean: HEAD's tree is the tree's content, so its readings are kept.
    tree = git.run("rev-parse", "HEAD^{tree}").stdout.strip()
    with known_tree(root, tree):
        return classify(git, series)


def classify_tree(root: Path, series: Series) -> list[PatchReport]:
    """Every patch's :class:`PatchState` in a tree that may not be a git
    checkout (a release's files, an installed vLLM), reading only.

    Without a history, applied and upstreamed look alike (0.29.0 carries
    the series verbatim): upstreamed (invariant) first, then applied (the
    patch reverses cleanly), not carried, then ``git apply --check`` on the
    files as they are, each patch alone.
    """
    git = Git(root)
    version = read_version(root)
    reports = []
    for patch in series.patches:
        name = patch.name
        if invariant_holds(git, patch):
            reports.append(PatchReport(name, PatchState.UPSTREAMED, "invariant holds"))
            continue
        carry = carry_of(patch, root, version)
        forward = _check_apply(git, patch.path)
        if forward.returncode == 0:
            state, detail = PatchState.APPLIES, "git apply --check"
        elif _check_apply(git, patch.path, "--reverse").returncode == 0:
            reports.append(PatchReport(name, PatchState.APPLIED, "reverses cleanly"))
            continue
        else:
            state, detail = PatchState.CONFLICT, forward.stderr.strip()[:200]
        if carry.carried:
            reports.append(PatchReport(name, state, detail, carry=carry.why))
        else:
            reports.append(PatchReport(name, PatchState.NOT_CARRIED, carry.why))
    return reports


def _check_apply(
    git: Git, patch: Path, *options: str
) -> subprocess.CompletedProcess[str]:
    # Outside a repository git apply acts like patch(1); inside one it
    # checks against the work tree. --check writes nothing: no hook is for it.
    return git.run("apply", "--check", *options, str(patch), check=False, hooks=False)
