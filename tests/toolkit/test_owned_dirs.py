"""Ownership of the directories the toolkit replaces, on small real repos.

The toolkit deletes or replaces a directory at a path the user chose only
when its record (kept outside the tree) says the toolkit made it and the
directory holds nothing else: every kind of work a user can leave in a git
repository is refused (exit 2) by name and left as it was, and nothing a
tree carries (a tracked marker file) makes it the toolkit's.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.checkout_state import checkout_state, directory_state
from tests.toolkit.cli_helpers import as_user, forks_worktree
from vllm_patchkit.errors import EXIT_REFUSED
from vllm_patchkit.git.owned_dirs import (
    NotOwnedError,
    check_owned,
    claim_dir,
    record,
    remove_owned,
)
from vllm_patchkit.gitcmd import Git, init_repo
from vllm_patchkit.paths import cache_dir


def _tool_repo(path: Path) -> Git:
    """A repository as the toolkit leaves one: a commit, a branch, an ignored
    cache file; recorded."""
    git = init_repo(path)
    (path / ".gitignore").write_text("__pycache__/\n")
    (path / "code.py").write_text("x = 1\n")
    git.run("add", ".")
    git.run("commit", "--quiet", "-m", "release")
    (path / "__pycache__").mkdir()
    (path / "__pycache__" / "code.pyc").write_bytes(b"cached")
    record(path, "the clone")
    return git


def _commit(path: Path) -> None:
    (path / "mine.txt").write_text("mine\n")
    as_user(path).run("add", "mine.txt")
    as_user(path).run("commit", "--quiet", "-m", "my unpushed work")


def _branch_commit(path: Path) -> None:
    as_user(path).run("switch", "--quiet", "-c", "feature")
    _commit(path)
    as_user(path).run("switch", "--quiet", "main")


def _detached_commit(path: Path) -> None:
    as_user(path).run("switch", "--quiet", "--detach")
    _commit(path)


def _stash(path: Path) -> None:
    (path / "code.py").write_text("x = 2\n")
    as_user(path).run("stash", "push", "--quiet", "-m", "my stash")


def _edit(path: Path) -> None:
    (path / "code.py").write_text("x = 2\n")


def _stage(path: Path) -> None:
    _edit(path)
    as_user(path).run("add", "code.py")


def _untracked(path: Path) -> None:
    (path / "draft.py").write_text("print('draft')\n")


def _ignored(path: Path) -> None:
    (path / "__pycache__" / "notes.pyc").write_bytes(b"mine")


def _ignored_changed(path: Path) -> None:
    (path / "__pycache__" / "code.pyc").write_bytes(b"rewritten by me")


def _worktree(path: Path) -> None:
    as_user(path).run(
        "worktree", "add", "--quiet", "--detach", str(path.parent / "wt"), "HEAD"
    )


USER_WORK: dict[str, tuple[Callable[[Path], None], str]] = {
    "commit on the branch": (_commit, "my unpushed work"),
    "commit on another branch": (_branch_commit, "my unpushed work"),
    "commit on a detached HEAD": (_detached_commit, "my unpushed work"),
    "stash": (_stash, "my stash"),
    "edited file": (_edit, "changed files: code.py"),
    "staged file": (_stage, "changed files: code.py"),
    "untracked file": (_untracked, "draft.py"),
    "new ignored file": (_ignored, "__pycache__/notes.pyc"),
    "changed ignored file": (_ignored_changed, "__pycache__/code.pyc"),
    "linked worktree": (_worktree, "linked worktrees"),
}


@pytest.mark.parametrize("work", USER_WORK, ids=list(USER_WORK))
def test_user_work_in_a_recorded_clone_is_refused_by_name(
    tmp_path: Path, work: str
) -> None:
    clone = tmp_path / "clone"
    _tool_repo(clone)
    make, named = USER_WORK[work]
    make(clone)
    before = checkout_state(clone)

    with pytest.raises(NotOwnedError) as refused:
        remove_owned(clone, "the demo's release clone")

    assert refused.value.code == EXIT_REFUSED
    assert "holds work it did not make" in str(refused.value)
    assert named in str(refused.value)
    assert checkout_state(clone) == before


def test_a_recorded_clone_left_as_made_is_replaced(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    git = _tool_repo(clone)
    # What the toolkit does next (its own commit), recorded again.
    (clone / "code.py").write_text("x = 3\n")
    git.run("commit", "--quiet", "-am", "the series")
    record(clone, "the clone")

    remove_owned(clone, "the clone")

    assert not clone.exists()


def test_a_removed_ref_or_file_loses_nothing(tmp_path: Path) -> None:
    """What the toolkit made, with less of it: still replaceable."""
    clone = tmp_path / "clone"
    git = _tool_repo(clone)
    git.run("tag", "v1")
    record(clone, "the clone")
    git.run("tag", "-d", "v1")
    shutil.rmtree(clone / "__pycache__")

    remove_owned(clone, "the clone")

    assert not clone.exists()


def test_a_forged_marker_in_a_forks_worktree_is_refused(tmp_path: Path) -> None:
    worktree = forks_worktree(tmp_path / "fork", tmp_path / "work" / "vllm-0.28.0")
    before = checkout_state(worktree)

    with pytest.raises(NotOwnedError) as refused:
        remove_owned(worktree, "the demo's release clone")

    assert "not created by vllm-patchkit" in str(refused.value)
    assert checkout_state(worktree) == before


def test_a_forged_record_of_a_linked_worktree_is_refused(tmp_path: Path) -> None:
    """Even recorded (as it cannot be by the toolkit), a directory whose
    .git is a file belongs to another repository."""
    worktree = forks_worktree(tmp_path / "fork", tmp_path / "work" / "vllm-0.28.0")
    record(worktree, "the clone")
    before = checkout_state(worktree)

    with pytest.raises(NotOwnedError, match="worktree or submodule"):
        remove_owned(worktree, "the clone")

    assert checkout_state(worktree) == before


def test_a_directory_made_anew_at_a_recorded_path_is_not_the_toolkits(
    tmp_path: Path,
) -> None:
    clone = tmp_path / "clone"
    _tool_repo(clone)
    shutil.rmtree(clone)
    init_repo(clone)  # the user's own, at the same path
    (clone / "notes.txt").write_text("mine\n")
    before = directory_state(clone)

    with pytest.raises(NotOwnedError, match="not created by vllm-patchkit"):
        remove_owned(clone, "the clone")

    assert directory_state(clone) == before


def test_a_bare_repository_with_only_made_commits_needs_no_record(
    tmp_path: Path,
) -> None:
    """``made``: commits the caller makes the same every time (an upstream's
    chain): a repository of only those is the toolkit's; one with more, or
    with a file of the user's beside git's own, is not."""
    work = tmp_path / "work"
    git = _tool_repo(work)
    made = git.head()
    bare = tmp_path / "bare.git"
    Git(tmp_path).run("clone", "--quiet", "--bare", str(work), str(bare))
    # As ``upstream`` makes one (git init --bare): a remote is not the toolkit's.
    with pytest.raises(NotOwnedError, match="remotes: origin"):
        check_owned(bare, "--dest", [made])
    Git(bare).run("remote", "remove", "origin")
    check_owned(bare, "--dest", [made])

    (bare / "notes.txt").write_text("mine\n")
    with pytest.raises(NotOwnedError, match="notes.txt"):
        check_owned(bare, "--dest", [made])
    (bare / "notes.txt").unlink()

    _commit(work)
    as_user(work).run("push", "--quiet", str(bare), "main")
    with pytest.raises(NotOwnedError, match="my unpushed work"):
        check_owned(bare, "--dest", [made])


def test_claim_dir_takes_only_a_new_empty_or_recorded_directory(
    tmp_path: Path,
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine\n")
    before = directory_state(mine)
    with pytest.raises(NotOwnedError, match="not created by vllm-patchkit"):
        claim_dir(mine, "--workdir")
    assert directory_state(mine) == before

    fresh = tmp_path / "fresh"
    claim_dir(fresh, "--workdir")
    (fresh / "vllm-0.28.0").mkdir()
    claim_dir(fresh, "--workdir")  # recorded: the toolkit's, non-empty or not


def test_records_of_directories_gone_are_dropped(tmp_path: Path) -> None:
    gone, kept = tmp_path / "gone", tmp_path / "kept"
    _tool_repo(gone)
    shutil.rmtree(gone)
    _tool_repo(kept)

    paths = {
        json.loads(entry.read_text())["path"]
        for entry in (cache_dir() / "owned").glob("*.json")
    }
    assert str(kept.resolve()) in paths
    assert str(gone.resolve()) not in paths
