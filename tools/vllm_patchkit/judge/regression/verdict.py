"""What the scenarios must show: the fix present, or the bug reproduced.

Both directions are spelled out so a test on stock code can assert that the
bug really happens (a suite that cannot fail proves nothing). Every outcome
becomes a check that passed, failed or could not run; one that could not run
is counted and named with its reason, never dropped and never a pass. A tree
is judged fixed only when no check failed and the core checks (each fix
names its own: ``CORE`` of its :mod:`.by_fix` module) ran and passed there;
otherwise, with no failure, the answer is "cannot judge".

Each check belongs to one fix, and each fix gets a verdict of its own by the
same rule over its own checks (:func:`judge_fixes`), for every fix of the
registry (:mod:`.by_fix` names each fix's scenarios).
A release can need one, several or none; which fixes decide a tree's verdict is for the
caller, who knows the series (see :mod:`vllm_patchkit.judge.verify`).

This module imports neither torch nor vLLM: the commands that only read a
report load it at start-up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from vllm_overlay.fixes import FIXES as REGISTRY
from vllm_patchkit.judge.regression import by_fix
from vllm_patchkit.judge.regression.by_fix import FACTS
from vllm_patchkit.judge.regression.checks import (
    FAILED,
    HARNESS_ERROR,
    NOT_RUN,
    PASSED,
    Check,
    check_name,
    describe_error,
    harness_error,
    status_of_result,
)
from vllm_patchkit.judge.regression.records import DECODE_QUERY_LENS, Outcome
from vllm_patchkit.judgement import Verdict

# Re-exported: reports, the toolkit and tests read these words from here.
__all__ = [
    "FAILED",
    "HARNESS_ERROR",
    "NOT_RUN",
    "PASSED",
    "Check",
    "check_name",
    "describe_error",
    "harness_error",
]

FIXED, NOT_FIXED, CANNOT_JUDGE = Verdict.FIXED, Verdict.NOT_FIXED, Verdict.CANNOT_JUDGE
"""The suite's verdicts: :class:`vllm_patchkit.judgement.Verdict`."""
NOT_CARRIED = "not carried here"
"""The word for a fix the series does not carry for the tree's release: its
checks are counted apart (:func:`set_apart`), never as failures beside the
verdict."""

_PR = {fix.name: fix.pr for fix in REGISTRY}
FIXES = tuple(_PR.values())
"""Every fix of the registry, by its PR label (:attr:`Fix.pr`): each gets a
verdict."""


def fix_of(scenario: str) -> str:
    """The fix a scenario judges, by its PR label (:func:`.by_fix.owner_of`)."""
    return _PR[by_fix.owner_of(scenario)]


CORE_BY_FIX = {
    fix.pr: tuple(
        check_name(s, q) for s in by_fix.core_of(fix.name) for q in DECODE_QUERY_LENS
    )
    for fix in REGISTRY
}
"""Per fix, the checks without which it is never called fixed (each of its
core scenarios at every query length)."""
CORE_CHECKS = tuple(name for fix in FIXES for name in CORE_BY_FIX[fix])


@dataclass(frozen=True)
class Tally:
    """How many checks ran, passed, failed, and which could not run and why
    (shown by :func:`tally_line`)."""

    passed: int = 0
    failed: int = 0
    not_run: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ran(self) -> int:
        return self.passed + self.failed

    @property
    def total(self) -> int:
        return self.ran + len(self.not_run)

    def to_json(self) -> dict[str, Any]:
        return {
            "ran": self.ran,
            "passed": self.passed,
            "failed": self.failed,
            "not_run": [{"name": n, "why": w} for n, w in self.not_run],
        }


def tally_line(counts: Tally) -> str:
    """``13 checks: 12 ran (12 passed, 0 failed), 1 could not run``."""
    return (
        f"{counts.total} checks: {counts.ran} ran ({counts.passed} passed, "
        f"{counts.failed} failed), {len(counts.not_run)} could not run"
    )


def as_check(check: Check | Mapping[str, Any]) -> Check:
    """A :class:`Check`, from itself or its JSON form (a report written
    before checks named their status, fix or applicability: from ``passed``,
    the scenario, and yes)."""
    if isinstance(check, Check):
        return check
    name = str(check["name"])
    status = check.get("status") or (PASSED if check.get("passed") else FAILED)
    fix = check.get("fix") or fix_of(name.split("[", 1)[0])
    applies = bool(check.get("applies", True))
    return Check(name, str(status), str(check.get("detail", "")), str(fix), applies)


def status_of(check: Check | Mapping[str, Any]) -> str:
    """A check's status, from a :class:`Check` or its JSON form."""
    return as_check(check).status


def tally(checks: Iterable[Check | Mapping[str, Any]]) -> Tally:
    checks = [as_check(c) for c in checks]
    return Tally(
        sum(c.status == PASSED for c in checks),
        sum(c.status == FAILED for c in checks),
        [(c.name, c.detail) for c in checks if c.status not in (PASSED, FAILED)],
    )


def check_fix(check: Check | Mapping[str, Any]) -> str:
    """The fix a check judges, from a :class:`Check` or its JSON form."""
    return as_check(check).fix


def counted(
    checks: Iterable[Check | Mapping[str, Any]], not_counted: Iterable[str]
) -> list[Any]:
    """The checks of the fixes that count: all but ``not_counted``'s (fixes
    the series does not carry for the tree's release)."""
    skip = set(not_counted)
    return [c for c in checks if check_fix(c) not in skip]


def set_apart(
    checks: Iterable[Check | Mapping[str, Any]], not_counted: Iterable[str]
) -> dict[str, int]:
    """Per fix of ``not_counted`` with checks here, how many: counted apart."""
    skip = set(not_counted)
    apart: dict[str, int] = {}
    for fix in map(check_fix, checks):
        if fix in skip:
            apart[fix] = apart.get(fix, 0) + 1
    return apart


def judge_fixes(
    checks: Iterable[Check | Mapping[str, Any]],
) -> dict[str, tuple[Verdict, str]]:
    """Per fix, ``(verdict, why)`` by :func:`judge`'s rule over its checks."""
    checks = [as_check(c) for c in checks]
    return {
        fix: judge([c for c in checks if c.fix == fix], CORE_BY_FIX[fix])
        for fix in FIXES
    }


def judge(
    checks: Iterable[Check | Mapping[str, Any]], core: tuple[str, ...] = CORE_CHECKS
) -> tuple[Verdict, str]:
    """``(verdict, why)``: a failure says not fixed; a fix needs the core run.

    A core check that does not apply to the tree (:attr:`Check.applies`) is
    not required, but a tree where none applies cannot be judged."""
    by_name = {c.name: c for c in map(as_check, checks)}
    failed = [n for n, c in by_name.items() if c.status == FAILED]
    if failed:
        return NOT_FIXED, f"failing checks: {', '.join(failed)}"
    missing, inapplicable = [], []
    for name in core:
        check = by_name.get(name)
        if check is None:
            missing.append(f"{name} (not in this run)")
        elif check.status != PASSED:
            if check.applies:
                missing.append(f"{name} ({check.detail})")
            else:
                inapplicable.append(name)
    if missing:
        return CANNOT_JUDGE, f"core checks did not run: {'; '.join(missing)}"
    if len(inapplicable) == len(core):
        return CANNOT_JUDGE, "no core check applies to this tree"
    why = "every check that ran passed, the core checks included"
    if inapplicable:
        why += f" (not applicable to this tree: {', '.join(inapplicable)})"
    return FIXED, why


def fixed_checks(outcomes: list[Outcome]) -> list[Check]:
    """One check per outcome; all pass if and only if the tree has the fix."""
    return [_check(outcome) for outcome in outcomes]


def _check(outcome: Outcome) -> Check:
    """The rules every scenario shares, then its fix's: every fact its fix
    module's ``FACTS`` names true (:mod:`.by_fix`), or the judge its module
    names (``CHECKS``). A scenario that records its code absent from the
    tree (``absent``) does not apply there."""
    name = check_name(outcome.scenario, outcome.decode_query_len)
    fix = fix_of(outcome.scenario)
    by_facts = outcome.scenario in FACTS
    absent = bool(outcome.facts.get("absent"))
    if outcome.status == "unavailable" and (by_facts or not absent):
        why = (outcome.error or {}).get("message") or "unavailable"
        return Check(name, NOT_RUN, str(why), fix, applies=not absent)
    if outcome.status == "error":
        return Check(name, NOT_RUN, harness_error(outcome.error), fix)
    if not by_facts:  # an absent scenario included: its fix's judge says why
        judge_of_fix = by_fix.checks_of(by_fix.owner_of(outcome.scenario))
        if judge_of_fix is None:
            why = f"no verdict for scenario {outcome.scenario!r}"
            return Check(name, NOT_RUN, why, fix)
        return judge_of_fix(outcome, fix)
    if outcome.status != "ok":
        return Check(name, FAILED, describe_error(outcome.error), fix)
    facts = outcome.facts
    wrong = [k for k in FACTS[outcome.scenario] if not facts.get(k)]
    detail = "ok"
    if wrong:
        after = {k: v for k, v in facts.items() if k.endswith(("_before", "_after"))}
        detail = f"violated: {', '.join(wrong)} ({facts.get('builder')}; {after})"
    return Check(name, status_of_result(not wrong), detail, fix)


def reproduced(checks: Iterable[Check | Mapping[str, Any]]) -> list[str]:
    """The fixes whose bug this tree shows: each fix with a failed check, in
    the registry's order (which of them count is the caller's, who knows
    the series: :attr:`vllm_patchkit.judge.verify.TreeRun.bug_reproduced`)."""
    failed = {c.fix for c in map(as_check, checks) if c.status == FAILED}
    return [fix for fix in FIXES if fix in failed]
