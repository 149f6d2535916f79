"""Paths and names a user gives that the toolkit must not trust.

``upstream --dest`` and ``demo --workdir`` build at a path the user chose:
a directory there that the toolkit did not create (a user's checkout, with
an unpushed commit and uncommitted work) is refused with exit 2 and left
byte for byte as it was, never deleted and replaced. So is a directory
the toolkit made once and the user then worked in, and a fork's worktree
whatever file it tracks: what the toolkit made is known from a record kept
outside the tree (``owned_dirs.py``). A bad ``demo --branch`` is refused
before the "before" run, not after it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.checkout_state import checkout_state, directory_state
from tests.toolkit.cli_helpers import as_user, forks_worktree, patchkit
from vllm_patchkit.errors import EXIT_REFUSED
from vllm_patchkit.git.apply import Status, apply_series
from vllm_patchkit.git.owned_dirs import claim_dir, record
from vllm_patchkit.git.series import load_series
from vllm_patchkit.git.upstream import build_upstream
from vllm_patchkit.gitcmd import Git, init_repo
from vllm_patchkit.judge.demo import CLONE, release_clone

pytestmark = pytest.mark.release_trees

RELEASE = "0.12.0"
CACHED = "0.28.0"
"""The demo's release (its tree is cached for the other tests too): the
refusals below come before any clone or run, or need only a clone."""


def _users_checkout(root: Path) -> Path:
    """A user's git checkout: a commit pushed nowhere, an uncommitted change
    and an untracked file."""
    init_repo(root)
    git = as_user(root)
    (root / "notes.txt").write_text("first\n")
    git.run("add", "notes.txt")
    git.run("commit", "--quiet", "-m", "my unpushed work")
    (root / "notes.txt").write_text("first\nuncommitted\n")
    (root / "draft.py").write_text("print('untracked')\n")
    return root


def test_upstream_refuses_a_dest_it_did_not_create(tmp_path: Path) -> None:
    dest = _users_checkout(tmp_path / "mine")
    before = checkout_state(dest)

    proc = patchkit("upstream", "--versions", RELEASE, "--dest", str(dest))

    assert proc.returncode == EXIT_REFUSED, proc.stdout + proc.stderr
    assert "not created by vllm-patchkit" in proc.stderr
    assert checkout_state(dest) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]  # no scratch


def test_upstream_rebuilds_a_dest_it_made(tmp_path: Path) -> None:
    """What the toolkit made it may replace: a build over an upstream it
    created that lacks a release's tag makes it anew."""
    dest = tmp_path / "upstream.git"
    proc = patchkit("upstream", "--versions", RELEASE, "--dest", str(dest))
    assert proc.returncode == 0, proc.stderr
    Git(dest).run("tag", "-d", f"v{RELEASE}")
    proc = patchkit("upstream", "--versions", RELEASE, "--dest", str(dest))
    assert proc.returncode == 0, proc.stderr
    assert Git(dest).out("tag", "--list") == f"v{RELEASE}"


def test_demo_refuses_a_workdir_clone_it_did_not_create(tmp_path: Path) -> None:
    tree = _users_checkout(tmp_path / f"vllm-{RELEASE}")
    before = checkout_state(tree)

    proc = patchkit("demo", "--release", RELEASE, "--workdir", str(tmp_path))

    assert proc.returncode == EXIT_REFUSED, proc.stdout + proc.stderr
    assert "not created by vllm-patchkit" in proc.stderr
    assert checkout_state(tree) == before


def test_demo_refuses_a_bad_branch_before_the_before_run(
    release_clone: Callable[[str], Path],
) -> None:
    tree = release_clone(RELEASE)
    before = checkout_state(tree)

    proc = patchkit("demo", str(tree), "--branch", "bad..name", "--json")

    assert proc.returncode == EXIT_REFUSED, proc.stdout + proc.stderr
    assert "'bad..name' is not a branch" in proc.stderr
    assert json.loads(proc.stdout)["status"] == "refused"  # no report: no run
    assert checkout_state(tree) == before


def _demo(workdir: Path) -> subprocess.CompletedProcess[str]:
    return patchkit("demo", "--release", CACHED, "--workdir", str(workdir))


def test_demo_refuses_a_workdir_that_is_a_users_checkout(tmp_path: Path) -> None:
    checkout = _users_checkout(tmp_path / "mine")
    before = directory_state(checkout)

    proc = _demo(checkout)

    assert proc.returncode == EXIT_REFUSED, proc.stdout + proc.stderr
    assert "not created by vllm-patchkit" in proc.stderr
    assert directory_state(checkout) == before  # no clone inside it either


@pytest.mark.parametrize("claimed", [False, True], ids=["any-workdir", "its-workdir"])
def test_demo_refuses_a_forks_worktree_with_a_forged_marker(
    tmp_path: Path, claimed: bool
) -> None:
    """The worktree stands where the demo's clone goes; ``its-workdir``: in a
    workdir the toolkit made, so that the clone's own check refuses it."""
    workdir = tmp_path / "work"
    if claimed:
        claim_dir(workdir, "--workdir")
    worktree = forks_worktree(tmp_path / "fork", workdir / f"vllm-{CACHED}")
    before = checkout_state(worktree)

    proc = _demo(workdir)

    assert proc.returncode == EXIT_REFUSED, proc.stdout + proc.stderr
    assert "not created by vllm-patchkit" in proc.stderr
    assert checkout_state(worktree) == before


def test_demo_refuses_a_user_commit_in_its_own_clone(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    tree = release_clone(workdir, CACHED)
    (tree / "mine.txt").write_text("mine\n")
    as_user(tree).run("add", "mine.txt")
    as_user(tree).run("commit", "--quiet", "-m", "my work in the demo's clone")
    before = checkout_state(tree)

    proc = _demo(workdir)

    assert proc.returncode == EXIT_REFUSED, proc.stdout + proc.stderr
    assert "my work in the demo's clone" in proc.stderr
    assert checkout_state(tree) == before


@pytest.mark.parametrize("work", ["reflog", "remote"])
def test_demo_refuses_work_only_its_clones_reflog_or_remotes_hold(
    tmp_path: Path, work: str
) -> None:
    """A commit reset away (reachable from the reflog alone) and a remote the
    user added are the user's: the rerun refuses, naming it, and keeps both."""
    workdir = tmp_path / "work"
    tree = release_clone(workdir, CACHED)
    git = as_user(tree)
    if work == "reflog":
        (tree / "mine.txt").write_text("mine\n")
        git.run("add", "mine.txt")
        git.run("commit", "--quiet", "-m", "my work, then reset away")
        kept = git.out("rev-parse", "HEAD")
        git.run("reset", "--quiet", "--hard", "HEAD~")
        named = "my work, then reset away"
    else:
        git.run("remote", "add", "mine", "https://example.invalid/mine.git")
        named = "mine"
    before = checkout_state(tree)

    proc = _demo(workdir)

    assert proc.returncode == EXIT_REFUSED, proc.stdout + proc.stderr
    assert named in proc.stderr, proc.stderr
    assert checkout_state(tree) == before
    if work == "reflog":
        assert git.out("cat-file", "-t", kept) == "commit"
    else:
        assert "mine" in git.out("remote").split()


@pytest.mark.slow
def test_demo_replaces_its_own_clone_left_as_it_made_it(tmp_path: Path) -> None:
    """The series applied and recorded, as a demo run leaves its clone: the
    next run makes it anew."""
    workdir = tmp_path / "work"
    tree = release_clone(workdir, CACHED)
    assert apply_series(tree, load_series()).status is Status.APPLIED
    record(tree, CLONE)

    again = release_clone(workdir, CACHED)

    assert again == tree
    assert Git(tree).out("rev-list", "--count", "HEAD") == "1"  # fresh: no series


def test_upstream_refuses_a_forks_worktree_with_a_forged_marker(
    tmp_path: Path,
) -> None:
    worktree = forks_worktree(tmp_path / "fork", tmp_path / "dest")
    before = checkout_state(worktree)

    proc = patchkit("upstream", "--versions", CACHED, "--dest", str(worktree))

    assert proc.returncode == EXIT_REFUSED, proc.stdout + proc.stderr
    assert "worktree or submodule" in proc.stderr
    assert checkout_state(worktree) == before


def _users_bare_repository(dest: Path, work: Path, *, tool_made: bool) -> None:
    """A bare repository tagged ``v<CACHED>`` whose main holds a user's
    commit: the user's own (``tool_made=False``), or an upstream the toolkit
    built with the user's commit pushed on top."""
    if tool_made:
        build_upstream([CACHED], dest)
        Git(work.parent).run("clone", "--quiet", str(dest), str(work))
    else:
        Git(work.parent).run(
            "init", "--quiet", "--bare", "--initial-branch=main", str(dest)
        )
        init_repo(work)
    (work / "mine.txt").write_text("mine\n")
    as_user(work).run("add", "mine.txt")
    as_user(work).run("commit", "--quiet", "-m", "my work on main")
    if not tool_made:
        as_user(work).run("tag", f"v{CACHED}")
    as_user(work).run("push", "--quiet", "--tags", str(dest), "main")


@pytest.mark.parametrize("tool_made", [False, True], ids=["users", "built-then-used"])
def test_upstream_refuses_a_bare_repository_holding_a_users_commit(
    tmp_path: Path, tool_made: bool
) -> None:
    dest = tmp_path / "upstream.git"
    _users_bare_repository(dest, tmp_path / "work", tool_made=tool_made)
    before = directory_state(dest)

    proc = patchkit("upstream", "--versions", CACHED, "--dest", str(dest))

    assert proc.returncode == EXIT_REFUSED, proc.stdout + proc.stderr
    assert "my work on main" in proc.stderr
    assert directory_state(dest) == before
