"""The branch a checkout is on, exactly as a rollback must switch back to it.

git's short names turn ambiguous for a branch named like a remote: with a
remote ``origin`` (``refs/remotes/origin/HEAD``), ``rev-parse --abbrev-ref``
calls the branch ``origin`` ``heads/origin``, and a rollback that switched
to that name would leave HEAD detached. Both readings of the branch take
the full ref and strip ``refs/heads/`` (:func:`vllm_patchkit.gitcmd.branch_of`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_patchkit.git.guard import Journal, restore_journal
from vllm_patchkit.gitcmd import Git, init_repo


def _repo(tmp_path: Path, branch: str) -> Git:
    git = init_repo(tmp_path / "repo")
    (git.root / "f.txt").write_text("one\n")
    git.run("add", "f.txt")
    git.run("commit", "-qm", "one")
    # A remote of the branch's name, as a clone of it has.
    git.run("update-ref", f"refs/remotes/{branch}/main", "HEAD")
    git.run(
        "symbolic-ref", f"refs/remotes/{branch}/HEAD", f"refs/remotes/{branch}/main"
    )
    git.run("switch", "-qc", branch)
    return git


@pytest.mark.parametrize("name", ["origin", "upstream", "feature/x", "release"])
def test_both_readings_name_the_branch(tmp_path: Path, name: str) -> None:
    git = _repo(tmp_path, name)
    head = git.head()
    assert git.branch() == name
    assert git.head_and_branch() == (head, name)


def test_a_detached_head_is_on_no_branch(tmp_path: Path) -> None:
    git = _repo(tmp_path, "origin")
    git.run("switch", "-q", "--detach", "HEAD")
    assert git.branch() is None
    assert git.head_and_branch()[1] is None


def test_a_rollback_returns_to_a_branch_named_like_a_remote(tmp_path: Path) -> None:
    git = _repo(tmp_path, "origin")
    head, branch = git.head_and_branch()
    (git.root / "f.txt").write_text("two\n")
    git.run("commit", "-qam", "two")
    git.run("switch", "-q", "--detach", "HEAD")
    restore_journal(git, Journal(head, branch, "", 0), None)
    assert git.branch() == "origin"
    assert git.head() == head
    assert (git.root / "f.txt").read_text() == "one\n"
