"""``vllm-patchkit test``: the verdict on real release trees and wrong fixes.

Each run imports vLLM from the tree under test (not the venv's install), so
these also prove that the command judges the tree it is given.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from tests.toolkit.cli_helpers import as_user, patchkit, patchkit_json, snapshot
from tests.toolkit.series_expectations import (
    FIRST_FIXES,
    counted_fixes,
    suite_size,
)
from vllm_overlay.fixes import FIXES, by_name
from vllm_patchkit.git.series import load_series
from vllm_patchkit.judge.regression.by_fix import scenarios_of
from vllm_patchkit.judge.regression.by_fix.rocm_capture_host_offsets.mutants import (
    MUTANTS,
    mutate,
)
from vllm_patchkit.judge.tree_pytest import series_test_files
from vllm_patchkit.judge.verify import fixes_not_counted, verify_tree
from vllm_patchkit.present.reports import format_verify
from vllm_patchkit.trees.releases import release_tree

pytestmark = pytest.mark.release_trees

ROCM_ATTN = "vllm/v1/attention/backends/rocm_attn.py"
UPSTREAM_TEST = "tests/v1/attention/test_rocm_attn_cudagraph_capture.py"
AITER_TEST = "tests/v1/attention/test_rocm_aiter_unified_attn_cudagraph_capture.py"
STATIC_SINK_TEST = "tests/v1/attention/test_static_sink_shared_state.py"
TEST_FILES = series_test_files(load_series())
"""0002's test, 0003's, 0005's (and any a fix added since): one pytest."""
UPSTREAM_TESTS = " ".join(TEST_FILES)
STATIC_SINK = by_name("static-sink-keeps-shared-seq-lens")
NOT_RUN = 3
"""#51585's checks that cannot run on CPU at query length 3 (named below)."""


COUNTED = counted_fixes("0.28.0")
ALL_CHECKS = suite_size(COUNTED)
OTHER_FIXES = [pr for pr in COUNTED if pr not in FIRST_FIXES]


def counts_line(label: str, passed: int, failed: int) -> str:
    """The summary line of one run whose only checks not run are the three
    of #51585 at query length 3."""
    ran = passed + failed
    return (
        f"{label}: {ran + NOT_RUN} checks: {ran} ran ({passed} passed, "
        f"{failed} failed), {NOT_RUN} could not run"
    )


AFTER_LINE = counts_line("after", ALL_CHECKS - NOT_RUN, 0)
"""Every check but those three passes once the series is in (0.28.0)."""


def owner(check: dict[str, Any]) -> str:
    """The fix whose ``by_fix`` module names the check's scenario."""
    scenario = check["name"].partition("[")[0]
    [pr] = [fix.pr for fix in FIXES if scenario in scenarios_of(fix.name)]
    return pr


def statuses(checks: list[dict[str, Any]], prs: Iterable[str]) -> Counter[str]:
    """How many of the checks of the fixes ``prs`` passed, failed, did not run."""
    wanted = set(prs)
    return Counter(c["status"] for c in checks if owner(c) in wanted)


def test_stock_affected_release_fails(
    release_clone: Callable[[str], Path],
) -> None:
    tree = release_clone("0.28.0")

    code, result = patchkit_json("test", str(tree))

    assert code == 1, result
    assert result["verdict"] == "not-fixed"
    after = result["after"]
    assert after["vllm_file"] == str(tree / "vllm" / "__init__.py")
    # Every fix 0.28.0 needs shows its bug (its checks fail), by name.
    bugs = [fix.pr for fix in FIXES if fix.record.affects("0.28.0")]
    assert after["bug_reproduced"] == bugs
    assert f"the bug reproduces ({', '.join(bugs)}: checks fail)" in result["message"]
    assert result["before"] is None  # no recorded base: nothing to compare
    assert after["upstream_test"] is None  # stock has no copy of patch 0002


@pytest.mark.slow
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
    assert after.fixed and after.counts["failed"] == 0
    assert set(FIRST_FIXES) <= set(COUNTED)  # by hand: 0.28.0 needs all three
    assert after.not_counted.keys() == {f.pr for f in FIXES} - set(COUNTED)
    assert after.counts["passed"] == after.counts["ran"] == ALL_CHECKS - NOT_RUN
    assert suite_size(FIRST_FIXES) == 70  # by hand: 67 ran, 3 could not
    assert statuses(after.checks, FIRST_FIXES) == {"passed": 67, "not run": 3}
    assert after.upstream_test is not None
    assert TEST_FILES[:3] == [UPSTREAM_TEST, AITER_TEST, STATIC_SINK_TEST]
    assert after.upstream_test.files == TEST_FILES
    cases = after.upstream_test.cases
    # 0005 and 0006 on 0.28.0: Triton's three cases run on the CPU; the four
    # FlashAttention cases need CUDA (0.28.0 has no ROCm Octave).
    assert (cases[UPSTREAM_TEST], cases[AITER_TEST], cases[STATIC_SINK_TEST]) == (
        4,
        5,
        7,
    )
    gpu_only = 4
    assert len(after.upstream_test.device_skips) == gpu_only
    every_case = sum(cases.values()) - gpu_only
    assert (after.upstream_test.passed, after.upstream_test.failed) == (every_case, 0)
    # The base is stock 0.28.0 with the tests copied in: the bugs, and every
    # case an assertion failure, no collection or import errors.
    assert before.bug_reproduced and not before.fixed
    stock = before.upstream_test
    assert stock is not None
    assert (stock.passed, stock.failed, stock.errors) == (0, every_case, 0)
    assert all("Error" in failure or "assert" in failure for failure in stock.failures)
    assert snapshot(tree) == before_run  # judged without a trace
    lines = format_verify(result).splitlines()
    assert lines[1].startswith("  before: refs/vllm-patchkit/base: ")
    # Each run says what ran it: this venv's torch, the release's pin.
    torch = metadata.version("torch")
    for label in ("before", "after"):
        assert f"  {label}: runtime: torch {torch} (the release pins torch 2.13.0" in (
            "\n".join(lines)
        )
    assert after.runtime is not None and after.runtime["torch"] == torch
    assert lines[5].split() == ["check", "before", "after"]
    assert any(
        line.startswith("upstream test")
        and f"FAIL 0 passed, {every_case} failed" in line
        for line in lines
    )
    assert lines[-1] == "verdict: FIXED: the fix is present and behaves correctly"
    # Every check is counted; those that could not run are named, with why.
    assert AFTER_LINE in lines
    # Before: StaticSink's eight checks fail too (0.28.0 has that bug). The
    # first three fixes' counts by hand; a fix added since, as its checks went.
    assert statuses(before.checks, FIRST_FIXES) == {
        "passed": 21,
        "failed": 46,
        "not run": 3,
    }
    others = statuses(before.checks, OTHER_FIXES)
    assert others.total() == suite_size(OTHER_FIXES) and not others["not run"]
    before_line = counts_line("before", 21 + others["passed"], 46 + others["failed"])
    assert before_line in lines
    assert any(
        line.startswith("after:   could not run: rocm_then_triton_mla[q=3]: cannot ")
        for line in lines
    )
    table = {line.split()[0]: line for line in lines if line.startswith("rocm_then_")}
    assert (
        "NOT RUN not run at query length 3" in table["rocm_then_kimi_k3_rocm_kda[q=3]"]
    )


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_tree_whose_runtime_lacks_a_package_is_not_judged(
    release_clone: Callable[[str], Path],
) -> None:
    """The ROCm backend needs a package its runtime cannot provide (scipy has
    no pure-Python wheel): every core check is a harness error, exit 3, and
    the report says what the runtime could not provide."""
    tree = _patched_clone(release_clone)
    backend = tree / "vllm/v1/attention/backends/rocm_attn.py"
    backend.write_text("import scipy  # noqa: F401\n" + backend.read_text())
    common = tree / "requirements/common.txt"
    common.write_text(common.read_text() + "scipy\n")
    as_user(tree).run("commit", "--quiet", "-am", "[Misc] needs scipy")

    code, result = patchkit_json("test", "--no-baseline", str(tree))

    assert code == 3, result
    assert result["verdict"] == "cannot-judge"
    assert "the suite cannot run on vLLM 0.28.0 with this venv" in result["message"]
    missing = result["after"]["runtime"]["missing"]
    assert "scipy: no pure-Python wheel on the configured index" in missing


def _patched_clone(release_clone: Callable[[str], Path]) -> Path:
    tree = release_clone("0.28.0")
    code, applied = patchkit_json("apply", str(tree))
    assert code == 0, applied
    return tree


@pytest.mark.slow
def test_a_tree_where_the_core_checks_cannot_run_is_not_judged(
    release_clone: Callable[[str], Path],
) -> None:
    """A fork whose MiniMax-M3 indexer needs a package the runtime lacks: the
    model is in the tree, so the PR's own crash could happen there, but it
    cannot be tried. Every check that runs passes, yet FIXED would claim what
    was not shown: the answer is "cannot judge" (exit 3), naming each check
    that could not run and why.
    """
    tree = _patched_clone(release_clone)
    indexer = tree / "vllm/models/minimax_m3/common/indexer.py"
    indexer.write_text("import fork_only_kernels  # noqa: F401\n" + indexer.read_text())
    git = as_user(tree)
    git.run("commit", "--quiet", "-am", "[Kernel] MiniMax-M3 indexer on our kernels")

    proc = patchkit("test", "--no-baseline", str(tree))

    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    verdict = lines[-1]
    assert verdict.startswith("verdict: CANNOT JUDGE: core checks did not run: ")
    assert (
        "minimax_indexer_after_rocm[q=1] (No module named 'fork_only_kernels')"
    ) in verdict
    counts = next(line for line in lines if line.startswith("after: "))
    assert ", 0 failed), " in counts and "could not run" in counts
    not_run = [line for line in lines if line.startswith("after:   could not run: ")]
    named = {line.split(": ")[2] for line in not_run}
    assert {
        "minimax_indexer_after_rocm[q=1]",
        "minimax_indexer_after_rocm[q=3]",
        "capture_loop_v1[q=1]",
        "rocm_then_minimax_indexer_msa[q=3]",
    } <= named
    assert "upstream test" in proc.stdout and "12 passed, 0 failed" in proc.stdout


@pytest.mark.slow
def test_a_tree_without_minimax_m3_rests_on_the_other_core_checks(
    release_clone: Callable[[str], Path],
) -> None:
    """A fork without MiniMax-M3 cannot hit the PR's crash whatever its
    version: the check is not applicable, and FIXED rests on the other core
    checks, which ran."""
    tree = _patched_clone(release_clone)
    git = as_user(tree)
    git.run("rm", "-r", "--quiet", "vllm/models/minimax_m3")
    git.run("commit", "--quiet", "-m", "[Misc] drop MiniMax-M3")

    proc = patchkit("test", "--no-baseline", str(tree))

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("verdict: FIXED")
    assert "minimax_indexer_after_rocm[q=1]: not applicable: " in proc.stdout


@pytest.mark.slow
def test_an_upstream_test_for_a_later_layout_leaves_the_suite_to_judge(
    release_clone: Callable[[str], Path],
) -> None:
    """0002's test on a release without a module it imports (0002 needs
    ``vllm.v1.attention.backend``, 0.14.0 on): it did not run and says why,
    naming the module; the suite's core checks, which ran, decide."""
    tree = _patched_clone(release_clone)
    test_file = tree / UPSTREAM_TEST
    text = test_file.read_text()
    absent = "vllm.v1.attention.layout_of_a_later_release"
    test_file.write_text(
        text.replace("import pytest\n", f"import pytest\nimport {absent}\n")
    )
    as_user(tree).run("commit", "--quiet", "-am", "[Misc] a later layout")

    code, result = patchkit_json("test", "--no-baseline", str(tree))

    assert code == 0, result
    test = result["after"]["upstream_test"]
    assert test["passed"] == test["failed"] == 0 and test["absent_modules"] == [absent]
    assert result["message"].startswith(
        "the fix is present and behaves correctly (the suite's core checks; the "
        f"upstream test {UPSTREAM_TESTS} did not run: it imports {absent}, "
    )
    assert result["after"]["counts"]["failed"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("breakage", ["import error", "nothing collected"])
def test_an_upstream_test_that_did_not_run_is_not_a_pass(
    release_clone: Callable[[str], Path], breakage: str
) -> None:
    """The suite passes; 0002's test errors at collection or collects nothing.

    A test that did not run says nothing: "cannot judge", exit 3, said plainly.
    """
    tree = _patched_clone(release_clone)
    test_file = tree / UPSTREAM_TEST
    text = test_file.read_text()
    if breakage == "import error":
        text = text.replace("import pytest\n", "import pytest\nimport no_such_module\n")
        reason = "1 error(s), first: "
        ran = "0 passed, 0 failed"  # a collection error stops the whole run
    else:
        text = text.replace("def test_", "def check_")
        # 0003's and 0005's tests still run and pass: 0002's file alone
        # collected nothing.
        reason = f"no case was collected from {UPSTREAM_TEST}"
        ran = "8 passed, 0 failed"
    test_file.write_text(text)
    as_user(tree).run("commit", "--quiet", "-am", f"[Misc] {breakage}")

    proc = patchkit("test", "--no-baseline", str(tree))

    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1].startswith(
        f"verdict: CANNOT JUDGE: the upstream test {UPSTREAM_TESTS} did not run: "
        + reason
    )
    # The suite itself passed: only the test's not running stops the verdict.
    assert AFTER_LINE in lines
    assert any(
        line.startswith("upstream test") and f"DID NOT RUN ({ran}" in line
        for line in lines
    )
    assert f"after:   did not run: {reason}" in proc.stdout


@pytest.mark.slow
def test_a_release_fixed_upstream_for_two_fixes_still_has_the_third() -> None:
    """A release tree, not a clone: 0.29.0 carries #51585's and #53821's fixes
    (not 0002's test) but not StaticSink's (0004 affects 0.14.0..0.33.0).
    Not fixed, exit 1, and only StaticSink's checks fail."""
    code, result = patchkit_json("test", str(release_tree("0.29.0")))

    assert code == 1, result
    assert result["verdict"] == "not-fixed"
    after = result["after"]
    # StaticSink's bug is the one this release shows.
    assert after["fixed"] is False
    assert after["bug_reproduced"] == [STATIC_SINK.pr]
    assert after["vllm_version"] == "0.29.0"
    assert after["upstream_test"] is None
    failing = {c["name"] for c in after["checks"] if c["status"] == "failed"}
    assert failing == {
        f"{scenario}[q={q}]"
        for scenario in scenarios_of(STATIC_SINK.name)
        for q in (1, 3)
    }
    assert {c["fix"] for c in after["checks"] if c["status"] == "failed"} == {
        STATIC_SINK.pr
    }
    assert result["message"].startswith(
        f"the bug reproduces ({STATIC_SINK.pr}: checks fail); "
        "failing checks: static_sink_"
    )


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


@pytest.mark.slow
def test_a_fix_not_carried_for_the_release_is_counted_apart_beside_fixed(
    release_clone: Callable[..., Path],
) -> None:
    """0.26.0 with the series applied: the fixes the series does not carry
    there (#53821: its ``Affects:`` starts later) still run, but their
    checks are counted apart ("not carried here"), never as failures beside
    the verdict. (The verdict itself is the upstream test's to give: 0005's
    in-place draft update case is skipped on 0.26.0, which has none.)"""
    tree = release_clone("0.26.0", "release")
    code, applied = patchkit_json("apply", str(tree))
    assert code == 0, applied
    apart = fixes_not_counted(load_series(), tree)
    assert apart, "every fix is carried for 0.26.0: this test proves nothing"

    proc = patchkit("test", "--no-baseline", str(tree))

    lines = proc.stdout.splitlines()
    assert proc.returncode != 1, proc.stdout + proc.stderr
    assert lines[-1].startswith(
        ("verdict: FIXED", "verdict: CANNOT JUDGE: the upstream test ")
    ), lines[-1]
    for fix in FIXES:
        if fix.pr not in apart:
            assert f"fix {fix.pr}: FIXED: " in proc.stdout, proc.stdout
    counts = [line for line in lines if line.startswith("after: ") and " ran (" in line]
    assert counts and all(", 0 failed)" in line for line in counts), counts
    assert not [line for line in lines if " FAIL " in f" {line} "], proc.stdout
    for fix in apart:
        assert any(
            line.startswith(f"after: not carried here: {fix}: ") for line in lines
        ), proc.stdout
        assert any(
            line.startswith(f"fix {fix}: not carried here (") for line in lines
        ), proc.stdout
