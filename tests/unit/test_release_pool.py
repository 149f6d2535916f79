"""A pooled tree comes back as new, whatever the test before did to it.

On a small real git tree (the pool does not care what it holds): a test
that commits, branches, tags, stashes, edits the config and the hooks,
starts a ``git am`` and leaves files changed, deleted and untracked hands
the tree back; the next test gets exactly the state a fresh build gives
(:func:`tests.toolkit.checkout_state.checkout_state`), and no new build.
A tree whose objects were damaged is never handed out again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.release_pool import ReleasePool
from tests.toolkit.checkout_state import checkout_state, lived_in
from vllm_patchkit.gitcmd import TOOL_IDENTITY, Git, init_repo
from vllm_patchkit.trees.releases import RELEASE_DATE

DATED = {"GIT_AUTHOR_DATE": RELEASE_DATE, "GIT_COMMITTER_DATE": RELEASE_DATE}
"""Fixed dates: every build makes the same commit."""


class Builds:
    """A tree builder that counts its builds."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, at: Path) -> None:
        self.count += 1
        at.mkdir(parents=True)
        (at / "README.md").write_text("a tree\n")
        (at / "pkg").mkdir()
        (at / "pkg" / "mod.py").write_text("X = 1\n")
        (at / ".gitignore").write_text("*.log\n")
        git = init_repo(at)
        git.run("add", "-A")
        git.run("commit", "--quiet", "-m", "release", env=DATED)
        git.run("tag", "v1.0")
        git.run("config", "user.name", "Someone")


def state(tree: Path) -> dict[str, Any]:
    """The checkout's whole state, its own path aside."""
    found = checkout_state(tree)
    found["worktrees"] = found["worktrees"].replace(str(tree), "TREE")
    return found


def use_hard(tree: Path) -> None:
    """Everything a test may leave behind in a checkout."""
    git = Git(tree, tuple(TOOL_IDENTITY.items()))
    lived_in(tree)
    (tree / "pkg" / "mod.py").write_text("X = 2\n")
    git.run("commit", "--quiet", "-am", "mine")
    git.run("switch", "--quiet", "-c", "feature")
    git.run("config", "user.name", "Someone Else")
    (tree / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\nexit 1\n")
    (tree / ".git" / "rebase-apply").mkdir()
    (tree / "README.md").unlink()
    (tree / "pkg" / "mod.py").write_text("X = 3\n")
    (tree / "new.py").write_text("untracked\n")
    (tree / "debug.log").write_text("ignored\n")
    (tree / "pkg" / "nested").mkdir()
    init_repo(tree / "pkg" / "nested")


def test_a_tree_comes_back_as_new_without_a_second_build(tmp_path: Path) -> None:
    build = Builds()
    pool = ReleasePool(tmp_path / "pool")
    fresh = tmp_path / "fresh"
    build(fresh)
    expected = state(fresh)

    first = tmp_path / "test1" / "vllm"
    pooled = pool.take("v1", first, build)
    assert state(first) == expected
    use_hard(first)
    assert state(first) != expected
    pool.give_back("v1", pooled, first)
    assert not first.exists()

    second = tmp_path / "test2" / "vllm"
    pool.take("v1", second, build)
    assert state(second) == expected
    assert build.count == 2  # the fresh tree above and the pool's one


def test_a_tree_with_damaged_objects_is_not_handed_out_again(
    tmp_path: Path,
) -> None:
    build = Builds()
    pool = ReleasePool(tmp_path / "pool")
    first = tmp_path / "test1" / "vllm"
    pooled = pool.take("v1", first, build)
    loose = next(p for p in (first / ".git" / "objects").rglob("*") if p.is_file())
    loose.chmod(0o644)
    loose.write_bytes(b"damaged")
    pool.give_back("v1", pooled, first)

    second = tmp_path / "test2" / "vllm"
    pool.take("v1", second, build)
    assert build.count == 2
    assert Git(second).run("fsck", check=False).returncode == 0
