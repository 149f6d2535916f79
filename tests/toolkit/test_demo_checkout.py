"""The main job on a user's vLLM checkout: fixed on a branch, nothing else touched.

(Separate from test_demo.py so the two long demo runs can go to different
pytest-xdist workers.)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import as_user, patchkit, patchkit_json
from tests.toolkit.series_expectations import (
    FIRST_FIXES,
    carried,
    counted_fixes,
    suite_size,
)
from vllm_overlay.fixes import FIXES
from vllm_patchkit.gitcmd import Git

pytestmark = pytest.mark.release_trees

COUNTED = counted_fixes("0.28.0")


@pytest.mark.slow
def test_demo_on_a_user_checkout_keeps_it_as_it_was(
    release_clone: Callable[[str], Path],
) -> None:
    checkout = release_clone("0.28.0")
    git = Git(checkout)
    head, branch = git.head(), git.branch()

    proc = patchkit("demo", str(checkout))

    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert proc.stdout.splitlines()[-1] == "verdict: FIXED"
    bugs = ", ".join(fix.pr for fix in FIXES if fix.record.affects("0.28.0"))
    assert f"before: the bug reproduces on this tree ({bugs})" in proc.stdout
    # Both runs counted; the checks that could not run named, with why. The
    # first three fixes' checks by hand (before: 21 pass, 46 fail; 3 of
    # #51585's cannot run on CPU); a fix added since, as many as its scenarios.
    lines = proc.stdout.splitlines()
    total, ran = suite_size(COUNTED), suite_size(COUNTED) - 3
    added = suite_size(pr for pr in COUNTED if pr not in FIRST_FIXES)
    assert suite_size(FIRST_FIXES) == 70 and set(FIRST_FIXES) <= set(COUNTED)
    after = f"after: {total} checks: {ran} ran ({ran} passed, 0 failed)"
    assert f"{after}, 3 could not run" in lines
    before = next(line for line in lines if line.startswith(f"before: {total} "))
    counts = re.fullmatch(
        rf"before: {total} checks: {ran} ran \((\d+) passed, (\d+) failed\), "
        "3 could not run",
        before,
    )
    assert counts is not None, before
    passed, failed = map(int, counts.groups())
    assert 21 <= passed <= 21 + added and 46 <= failed <= 46 + added, before
    assert (
        "after:   could not run: rocm_then_kimi_k3_rocm_kda[q=3]: "
        "not run at query length 3 on CPU"
    ) in lines
    assert (git.head(), git.branch(), git.status_porcelain()) == (head, branch, "")
    series_length = str(len(carried("0.28.0")))
    assert (
        git.out("rev-list", "--count", f"{head}..vllm-overlay/series") == series_length
    )
    assert git.out("worktree", "list", "--porcelain").count("worktree ") == 1
    assert not list(checkout.rglob("__pycache__"))


@pytest.mark.slow
def test_demo_on_a_checkout_without_minimax_m3_rests_on_the_other_core_checks(
    release_clone: Callable[[str], Path],
) -> None:
    """A fork without MiniMax-M3 cannot hit the PR's crash, whatever its
    version: that check is not applicable there, and the verdict rests on
    the other core checks, which ran and pass after the series (FIXED)."""
    checkout = release_clone("0.28.0")
    git = as_user(checkout)
    git.run("rm", "-r", "--quiet", "vllm/models/minimax_m3")
    git.run("commit", "--quiet", "-m", "[Misc] drop MiniMax-M3")

    proc = patchkit("demo", str(checkout), "--branch", "fixed-here")

    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "verdict: FIXED" in lines
    after = next(line for line in lines if line.startswith("after: "))
    assert ", 0 failed), " in after
    assert (
        "after:   could not run: minimax_indexer_after_rocm[q=3]: not applicable: "
        "this tree has no MiniMax-M3"
    ) in proc.stdout


@pytest.mark.slow
def test_demo_on_a_checkout_whose_minimax_m3_cannot_import_cannot_judge(
    release_clone: Callable[[str], Path],
) -> None:
    """A fork whose MiniMax-M3 indexer needs a package this runtime lacks:
    the PR's own crash could not be tried on a tree that has the model, so
    no FIXED (exit 3), and the reason is the import, not an absence."""
    checkout = release_clone("0.28.0")
    indexer = checkout / "vllm/models/minimax_m3/common/indexer.py"
    indexer.write_text("import fork_only_kernels  # noqa: F401\n" + indexer.read_text())
    git = as_user(checkout)
    git.run("commit", "--quiet", "-am", "[Kernel] MiniMax-M3 indexer on our kernels")

    proc = patchkit("demo", str(checkout), "--branch", "fixed-here")

    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    verdict = next(line for line in lines if line.startswith("verdict: "))
    assert verdict == (
        "verdict: CANNOT JUDGE: core checks did not run: "
        "minimax_indexer_after_rocm[q=1] (No module named 'fork_only_kernels'); "
        "minimax_indexer_after_rocm[q=3] (No module named 'fork_only_kernels')"
    )
    after = next(line for line in lines if line.startswith("after: "))
    assert ", 0 failed), " in after
    assert "not in this tree: ModuleNotFoundError: No module named" not in proc.stdout
    assert (
        "after:   could not run: rocm_then_minimax_indexer_msa[q=1]: cannot import: "
        "ModuleNotFoundError: No module named 'fork_only_kernels'"
    ) in lines


@pytest.mark.slow
def test_demo_and_test_give_one_verdict_on_a_checkout_the_series_already_fixed(
    release_clone: Callable[[str], Path],
) -> None:
    """A checkout that already carries the series (``apply`` ran): ``demo``
    has nothing to apply, and its answer is ``test``'s on that same tree,
    not "not fixed" because the series did not apply again."""
    checkout = release_clone("0.28.0")
    code, applied = patchkit_json("apply", str(checkout))
    assert code == 0, applied

    test_code, tested = patchkit_json("test", "--no-baseline", str(checkout))
    demo_code, demo = patchkit_json("demo", str(checkout), "--branch", "again")

    assert (tested["verdict"], test_code) == ("fixed", 0), tested["message"]
    assert (demo["verdict"], demo_code) == (tested["verdict"], test_code), demo
    assert demo["why"] == tested["message"]
    assert demo["apply"]["status"] == "already-applied"
