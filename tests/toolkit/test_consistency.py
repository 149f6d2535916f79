"""One verdict per tree and one state per patch, whichever command asks.

Over trees as users have them (a git checkout of the tag ``vX.Y.Z``, no
``vllm/_version.py``, a commit of the user's own on top), for a release
before 0003's range (0.17.0), inside every fix's range (0.28.0) and after
#51585's and #53821's (0.29.0, still inside StaticSink's, 0004: 0.14.0 to
0.33.0): stock, with the series applied by ``apply``, and (0.17.0) applied
by a user's ``git am`` with and without a commit on top.

- verdict: ``test`` (exit and JSON; the nightly gate is ``test``'s exit),
  the matrix's suite cell, ``demo PATH`` (about the tree the series makes
  of PATH) and ``pr``'s test run (0.17.0, where #53821 is not carried;
  ``--fix`` names #51585's fix, upstream taking one fix per PR).
- state: ``check``, ``doctor PATH`` and ``apply`` (a no-op on a tree that
  already has what the series carries; on stock, the states it leaves).

The suite runs once per distinct tree content (the report cache); the
other commands reuse those runs. Each release is a journey of minutes: the
whole file is in the extended tier ``slow`` (CI's ``--all-tiers``); the
default run keeps each command on its own (``test``, ``demo``, ``pr``,
``check``, ``doctor``, ``apply`` on 0.28.0 in their own files).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import patchkit_json, snapshot, user_commit
from tests.toolkit.series_expectations import (
    SERIES,
    applied_statuses,
    carried,
    stock_statuses,
)
from vllm_overlay.fixes import FIXES
from vllm_patchkit.git.series import Series
from vllm_patchkit.gitcmd import TOOL_IDENTITY, Git
from vllm_patchkit.judge.matrix import run_suite
from vllm_patchkit.judge.regression.verdict import CANNOT_JUDGE
from vllm_patchkit.paths import PATCHES_DIR

pytestmark = pytest.mark.release_trees

EXIT = {"fixed": 0, "not-fixed": 1, "cannot-judge": 3}
MATRIX = {
    "passes": "fixed",
    "fails": "not-fixed",
    "bug reproduced": "not-fixed",
    CANNOT_JUDGE: CANNOT_JUDGE,
}
EXPECTED = {
    # release: stock verdict (states once applied: then fixed). The states
    # before and after apply follow each patch's Affects: and
    # Applied-Upstream: (series_expectations). Every stock release here has
    # the StaticSink bug (0004 affects 0.14.0..0.33.0), so none is fixed
    # stock; 0.29.0 has #51585's and #53821's fixes, not 0002's test.
    "0.17.0": "not-fixed",
    "0.28.0": "not-fixed",
    "0.29.0": "not-fixed",
}
AITER = next(p.name for p in SERIES.patches if p.name.startswith("0003"))
AITER_STATE = {"0.17.0": "not-carried", "0.28.0": "applies", "0.29.0": "upstreamed"}
"""0003 (#53821's backport, 0.27.0..0.28.0) by hand: checks the helper."""


def verdict_of(tree: Path, series: Series) -> str:
    """``test``'s verdict, after checking its exit and the matrix's cell."""
    code, result = patchkit_json("test", "--no-baseline", str(tree))
    verdict = result["verdict"]
    assert code == EXIT[verdict], result["message"]
    cell = run_suite(tree, series)
    assert MATRIX.get(cell.status) == verdict, (tree, verdict, cell.text)
    return str(verdict)


def states_of(tree: Path) -> list[str]:
    """``check``'s states, after checking that doctor names the same ones."""
    _, checked = patchkit_json("check", str(tree))
    _, doctor = patchkit_json("doctor", str(tree))
    states = [p["status"] for p in checked["patches"]]
    assert [p["status"] for p in doctor["patches"]] == states, tree
    return states


def apply_states(tree: Path) -> list[str]:
    """What ``apply`` says of each patch (a no-op here: asserted)."""
    before = snapshot(tree)
    code, result = patchkit_json("apply", str(tree))
    assert code in (0, 5), result
    assert snapshot(tree) == before
    return [p["status"] for p in result["patches"]]


def clone(source: Path, dest: Path) -> Git:
    Git(dest.parent).run("clone", "--quiet", str(source), str(dest))
    return Git(dest, tuple(TOOL_IDENTITY.items()))


def git_am(git: Git, names: list[str]) -> None:
    paths = [str(p) for name in names for p in PATCHES_DIR.glob(f"{name}-*.patch")]
    git.run("am", "--quiet", "-3", *paths)


@pytest.mark.slow  # each release a journey of minutes over three to five trees
@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_every_command_gives_one_verdict_and_one_state_per_tree(
    release_clone: Callable[[str], Path],
    tmp_path: Path,
    series: Series,
    version: str,
) -> None:
    stock_verdict = EXPECTED[version]
    stock_states, applied_states = stock_statuses(version), applied_statuses(version)
    stock = release_clone(version)
    assert not (stock / "vllm/_version.py").exists()
    assert states_of(stock) == stock_states
    names = [p.name for p in SERIES.patches]
    assert stock_states[names.index(AITER)] == AITER_STATE[version]
    assert verdict_of(stock, series) == stock_verdict
    by_apply = clone(stock, tmp_path / "by-apply").root
    code, applied = patchkit_json("apply", str(by_apply))
    assert code == 0, applied
    assert [p["status"] for p in applied["patches"]] == applied_states
    trees = {"apply": by_apply}
    if version == "0.17.0":
        by_am = clone(stock, tmp_path / "by-am")
        git_am(by_am, [patch.name.split("-")[0] for patch in carried(version)])
        trees["git am"] = by_am.root
        on_top = clone(by_am.root, tmp_path / "am-and-user")
        user_commit(on_top)
        trees["git am, user commit on top"] = on_top.root
    for how, tree in trees.items():
        assert states_of(tree) == applied_states, how
        assert apply_states(tree) == applied_states, how
        assert verdict_of(tree, series) == "fixed", how

    # demo judges the tree the series makes of the stock one.
    code, demo = patchkit_json("demo", str(stock))
    assert (code, demo["verdict"]) == (0, "fixed"), demo["why"]

    if version == "0.17.0":
        checkout = trees["apply"]
        Git(checkout).run("config", "user.name", "Fork Maintainer")
        Git(checkout).run("config", "user.email", "fork@example.invalid")
        Git(checkout).run("remote", "remove", "origin")
        code, pr = patchkit_json(
            "pr",
            "--dry-run",
            "--signoff",
            "--no-precommit",
            "--fix",
            FIXES[0].name,
            str(checkout),
        )
        assert code == 0, pr
        assert [r["returncode"] for r in pr["runs"]] == [EXIT["fixed"]]
