"""``vllm-patchkit test``: the verdict on real release trees and wrong fixes.

Each run imports vLLM from the tree under test (not the venv's install), so
these also prove that the command judges the tree it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import as_user, patchkit, patchkit_json, snapshot
from vllm_patchkit.mutation.mutants import MUTANTS, mutate
from vllm_patchkit.releases import release_tree
from vllm_patchkit.reports import format_verify
from vllm_patchkit.series import load_series
from vllm_patchkit.verify import verify_tree

pytestmark = pytest.mark.release_trees

ROCM_ATTN = "vllm/v1/attention/backends/rocm_attn.py"
UPSTREAM_TEST = "tests/v1/attention/test_rocm_attn_cudagraph_capture.py"


def test_stock_affected_release_fails(
    release_clone: Callable[[str], Path],
) -> None:
    tree = release_clone("0.28.0")

    code, result = patchkit_json("test", str(tree))

    assert code == 1, result
    assert result["verdict"] == "not-fixed"
    after = result["after"]
    assert after["vllm_file"] == str(tree / "vllm" / "__init__.py")
    assert after["bug_reproduced"] is True
    assert "the bug reproduces" in result["message"]
    assert result["before"] is None  # no recorded base: nothing to compare
    assert after["upstream_test"] is None  # stock has no copy of patch 0002


def test_the_series_passes_and_its_test_fails_on_the_base(
    release_clone: Callable[[str], Path],
) -> None:
    """Patch 0002 run inside unpatched and patched 0.28.0 source trees."""
    tree = release_clone("0.28.0")
    code, applied = patchkit_json("apply", str(tree))
    assert code == 0, applied
    before_run = snapshot(tree)

    result = verify_tree(tree, load_series())

    assert result.verdict == "fixed", result.message
    after, before = result.after, result.before
    assert before is not None
    assert after.fixed and all(c["passed"] for c in after.checks)
    assert after.upstream_test is not None
    assert after.upstream_test.files == [UPSTREAM_TEST]
    assert (after.upstream_test.passed, after.upstream_test.failed) == (4, 0)
    # The base is stock 0.28.0 with the test copied in: the bug and four
    # assertion failures, no collection or import errors.
    assert before.bug_reproduced and not before.fixed
    stock = before.upstream_test
    assert stock is not None
    assert (stock.passed, stock.failed, stock.errors) == (0, 4, 0)
    assert all("Error" in failure or "assert" in failure for failure in stock.failures)
    assert snapshot(tree) == before_run  # judged without a trace
    lines = format_verify(result).splitlines()
    assert lines[1].startswith("  before: refs/vllm-patchkit/base: ")
    assert lines[3].split() == ["check", "before", "after"]
    assert any(
        line.startswith("upstream test") and "FAIL 0 passed, 4 failed" in line
        for line in lines
    )
    assert lines[-1] == "verdict: FIXED: the fix is present and behaves correctly"


@pytest.mark.parametrize("mutant", ["host_alias"])
def test_a_wrong_fix_fails(release_clone: Callable[[str], Path], mutant: str) -> None:
    """host_alias zeroes the host offsets where the AST invariant cannot see."""
    tree = release_clone("0.28.0")
    code, applied = patchkit_json("apply", str(tree))
    assert code == 0, applied
    source = tree / ROCM_ATTN
    wrong = next(m for m in MUTANTS if m.name == mutant)
    source.write_text(mutate(source.read_text(), wrong))
    as_user(tree).run("commit", "--quiet", "-am", f"[Misc] {wrong.description}")

    code, result = patchkit_json("test", "--no-baseline", str(tree))

    assert code == 1, result
    assert result["verdict"] == "not-fixed"
    assert result["before"] is None
    assert not result["after"]["fixed"]
    assert result["after"]["upstream_test"]["failed"] > 0


def test_a_tree_the_venv_cannot_run_is_not_judged(
    release_clone: Callable[[str], Path],
) -> None:
    """0.12.0 needs other dependencies than this venv's: exit 3, not a verdict.

    Its patched tree also cannot import patch 0002's test (vLLM 0.14.0 moved
    CommonAttentionMetadata); that is reported, not counted as a failure.
    """
    tree = release_clone("0.12.0")
    code, applied = patchkit_json("apply", str(tree))
    assert code == 0, applied

    code, result = patchkit_json("test", "--no-baseline", str(tree))

    assert code == 3, result
    assert result["verdict"] == "error"
    assert "the suite cannot run on vLLM 0.12.0 with this venv" in result["message"]
    test = result["after"]["upstream_test"]
    assert (test["passed"], test["failed"], test["errors"]) == (0, 0, 1)


def test_fixed_release_tree_passes() -> None:
    """A release tree, not a clone; upstream carries the fix but not 0002."""
    code, result = patchkit_json("test", str(release_tree("0.29.0")))

    assert code == 0, result
    assert result["after"]["fixed"] is True
    assert result["after"]["vllm_version"] == "0.29.0"
    assert result["after"]["upstream_test"] is None


def test_refuses_what_is_not_a_vllm_tree(tmp_path: Path) -> None:
    proc = patchkit("test", str(tmp_path))
    assert proc.returncode == 2
    assert "not a vLLM source tree" in proc.stderr
    code, refused = patchkit_json("test", str(tmp_path))
    assert (code, refused["status"]) == (2, "refused")
    assert "not a vLLM source tree" in refused["error"]
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text("")
    proc = patchkit("test", "--baseline", "HEAD", str(tmp_path))
    assert proc.returncode == 2
    assert "--baseline needs a git checkout" in proc.stderr
    git = as_user(tmp_path)
    git.run("init", "--quiet")
    git.run("add", "vllm")
    git.run("commit", "--quiet", "-m", "not much of a vLLM")
    # Refused before any suite run, not after one.
    proc = patchkit("test", "--baseline", "no-such-rev", str(tmp_path))
    assert proc.returncode == 2
    assert "baseline 'no-such-rev' is not a commit" in proc.stderr
