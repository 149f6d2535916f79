"""One verdict vocabulary, and every exit code that reports a verdict from it.

The suite, ``test``, ``demo``, ``pr``, the matrix, the overlay probe and the
audit once each spelled "cannot judge" and picked its exit code on their own
("cannot judge" and "cannot-judge"; 3 written five times).
"""

from __future__ import annotations

import pytest

from vllm_patchkit import errors
from vllm_patchkit.judge.audit.findings import AuditReport, Check, Finding
from vllm_patchkit.judge.matrix import UNJUDGED, Cell
from vllm_patchkit.judge.overlay_probe import (
    CANNOT_JUDGE,
    FAILS,
    FIXES,
    INERT,
    OverlayResult,
)
from vllm_patchkit.judgement import Judgement, Verdict
from vllm_patchkit.trees.requirement_files import UnreadableRequirements


def test_each_verdict_has_one_spelling_and_the_exit_code_of_errors() -> None:
    assert {v.value: v.exit_code for v in Verdict} == {
        "fixed": errors.EXIT_OK,
        "not-fixed": errors.EXIT_FAILED,
        "cannot-judge": errors.EXIT_ERROR,
    }
    assert Verdict.CANNOT_JUDGE.words == "cannot judge"
    assert Verdict.NOT_FIXED.heading == "NOT FIXED"
    for verdict in Verdict:
        assert Verdict.read(verdict.value) is verdict
        assert Verdict.read(verdict.words) is verdict
    assert Verdict.read("passes") is None
    assert Judgement(Verdict.CANNOT_JUDGE, "why").exit_code == errors.EXIT_ERROR


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        (FIXES, Verdict.FIXED),
        (INERT, Verdict.FIXED),
        (FAILS, Verdict.NOT_FIXED),
        (CANNOT_JUDGE, Verdict.CANNOT_JUDGE),
    ],
)
def test_the_overlay_probe_exits_with_its_verdicts_code(
    status: str, verdict: Verdict
) -> None:
    result = OverlayResult(status, "bug reproduced", "passes", (), "why", 1.0)
    assert result.verdict is verdict
    assert result.verdict.exit_code == verdict.exit_code


def test_the_audit_exits_with_its_verdicts_code_and_keeps_its_words() -> None:
    where = ("rocm_attn.py", 1, "query_start_loc_cpu", "build", "zero_()")
    write = Finding(*where)
    harmful = AuditReport("t", "0.28.0", [Finding(*where, kind="harmful")])
    unseen = AuditReport("t", "0.11.0", checks=[Check("dynamic", ran=False)])
    clean = AuditReport("t", "0.29.0", [write], [Check("static", True, True)])
    answers = [(r.verdict, r.exit_code) for r in (harmful, unseen, clean)]
    assert answers == [
        ("harmful", Verdict.NOT_FIXED.exit_code),
        ("cannot judge", Verdict.CANNOT_JUDGE.exit_code),
        ("no harmful write", Verdict.FIXED.exit_code),
    ]


def test_a_cell_in_either_spelling_counts_as_unjudged() -> None:
    for word in ("cannot judge", "cannot-judge"):
        cell = Cell(word, f"{word}: why")
        assert cell.status is Verdict.CANNOT_JUDGE and cell.status in UNJUDGED


def test_unreadable_requirements_are_a_cannot_judge_error() -> None:
    error = UnreadableRequirements("requirements/common.txt: too large")
    assert (error.code, error.status) == (
        Verdict.CANNOT_JUDGE.exit_code,
        Verdict.CANNOT_JUDGE.value,
    )
