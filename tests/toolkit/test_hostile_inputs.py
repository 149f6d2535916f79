"""Paths and names a user gives that the toolkit must not trust.

``upstream --dest`` and ``demo --workdir`` build at a path the user chose:
a directory there that the toolkit did not create (a user's checkout, with
an unpushed commit and uncommitted work) is refused with exit 2 and left
byte for byte as it was, never deleted and replaced. A bad ``demo --branch``
is refused before the "before" run, not after it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.checkout_state import checkout_state
from tests.toolkit.cli_helpers import as_user, patchkit
from vllm_patchkit.errors import EXIT_REFUSED
from vllm_patchkit.gitcmd import Git, init_repo

pytestmark = pytest.mark.release_trees

RELEASE = "0.12.0"


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
