"""A suite report read back into a :class:`TreeRun`: which bugs it shows.

A report from before the suite named the fixes whose checks failed says
only yes or no (``bug_reproduced: true``); its checks then say which.
"""

from __future__ import annotations

from pathlib import Path

from vllm_patchkit.judge.regression.checks import FAILED, PASSED, Check
from vllm_patchkit.judge.regression.runner import TreeReport
from vllm_patchkit.judge.regression.verdict import FIXES
from vllm_patchkit.judge.verify import tree_run


def _report(tree: Path, said: object, failing_fix: str) -> TreeReport:
    checks = [
        Check("a[q=1]", FAILED, "wrong", failing_fix).to_json(),
        *(
            Check(f"b{i}[q=1]", PASSED, "", fix).to_json()
            for i, fix in enumerate(FIXES)
        ),
    ]
    report = {
        "vllm_version": "0.28.0",
        "vllm_file": str(tree / "vllm" / "__init__.py"),
        "fixed": False,
        "bug_reproduced": said,
        "verdict": "not-fixed",
        "why": "a check failed",
        "checks": checks,
    }
    return TreeReport(tree, 1, report, "")


def test_an_old_report_that_says_yes_names_the_fixes_its_checks_failed(
    tmp_path: Path,
) -> None:
    fix = FIXES[-1]
    run = tree_run(tmp_path, "before", None, _report(tmp_path, True, fix))
    assert run.bug_reproduced == [fix]
    assert run.failing_fixes == [fix]


def test_an_old_report_that_says_no_names_none(tmp_path: Path) -> None:
    fix = FIXES[0]
    run = tree_run(tmp_path, "before", None, _report(tmp_path, False, fix))
    assert run.bug_reproduced == []


def test_a_report_that_names_its_fixes_is_taken_at_its_word(tmp_path: Path) -> None:
    fix = FIXES[0]
    run = tree_run(tmp_path, "before", None, _report(tmp_path, [fix], fix))
    assert run.bug_reproduced == [fix]
