"""The scenarios of every fix, each run against whatever vLLM is importable.

A scenario never decides pass or fail by itself: it records what vLLM did
(the facts, or the exception with the file and line that raised it). Each
fix's scenarios live in its own module (:mod:`.by_fix`, in the registry's
order), and the expectations in :mod:`vllm_patchkit.judge.regression.verdict`,
so the same run shows the bug on stock code and its absence with the fix.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from vllm_patchkit.judge.mutation.mutants import Mutant, MutationError
from vllm_patchkit.judge.regression import by_fix, harness
from vllm_patchkit.judge.regression.records import (
    DECODE_QUERY_LENS,
    Outcome,
    SetupError,
    error_info,
    involves_code_under_test,
    raised_outcome,
    unavailable,
)
from vllm_patchkit.judge.regression.verdict import FAILED, fixed_checks

__all__ = ["DECODE_QUERY_LENS", "SCENARIOS", "Outcome", "error_info", "run_all"]

Scenario = Callable[[int], Outcome]


def failed_outcome(name: str, query_len: int, exc: Exception) -> Outcome:
    """The outcome of a scenario that raised ``exc``. Raised through the
    code under test: the behaviour failed. A vLLM module the tree lacks (a
    fork that renamed ``rocm_attn.py``): not in this tree, so the check did
    not run. A set-up step that failed (:class:`SetupError`), or anything
    else: the harness failed, the check did not run."""
    if isinstance(exc, SetupError):
        return raised_outcome(name, query_len, exc)
    missing = harness.absent_module(exc)
    if missing is not None:
        why = f"not in this tree: {type(exc).__name__}: {exc}"
        return unavailable(name, query_len, why, missing=missing)
    status = "raised" if involves_code_under_test(exc) else "error"
    return Outcome(name, query_len, status, error=error_info(exc))


SCENARIOS: dict[str, Scenario] = by_fix.scenarios()
"""Every fix's scenarios, by name, each fix's in the registry's order."""


def run_all(
    names: list[str] | None = None,
    stop: Callable[[Outcome], bool] | None = None,
) -> list[Outcome]:
    """Run the scenarios in order; ``stop`` ends the run after an outcome."""
    outcomes = []
    for name in names or list(SCENARIOS):
        for query_len in DECODE_QUERY_LENS:
            try:
                outcome = SCENARIOS[name](query_len)
            except Exception as exc:  # reported, never hidden
                outcome = failed_outcome(name, query_len, exc)
            outcomes.append(outcome)
            if stop is not None and stop(outcome):
                return outcomes
    return outcomes


def fresh_module(name: str, source: str, label: str) -> types.ModuleType:
    """``source`` run as module ``name`` (a mutant of it): a fresh module
    object, never put in ``sys.modules``, so one vLLM import serves every
    mutant."""
    module = types.ModuleType(name)
    module.__file__ = importlib.import_module(name).__file__
    exec(compile(source, f"<mutant {label}>", "exec"), module.__dict__)
    return module


def module_source(name: str) -> str:
    """The source of the importable module ``name``."""
    file = importlib.import_module(name).__file__
    assert file is not None
    return Path(file).read_text()


def mutant_report(
    baseline: list[str], mutants: Iterable[Mutant], failing: Callable[[Any], list[str]]
) -> dict[str, Any]:
    """A fix's in-process mutant run, as :func:`report_command` shows it: the
    unmutated code's failing checks, then each mutant's (``failing``); a
    mutant whose statements the code lacks (a stock tree) is not made."""
    report: dict[str, Any] = {"baseline_failing": baseline, "mutants": []}
    for mutant in mutants:
        entry: dict[str, Any] = {"name": mutant.name, "description": mutant.description}
        try:
            failed = failing(mutant)
        except MutationError as exc:
            entry.update(killed=False, failing_checks=[], not_made=str(exc))
        else:
            entry.update(killed=bool(failed), failing_checks=failed)
        report["mutants"].append(entry)
    return report


def failing_checks(outcomes: list[Outcome]) -> list[str]:
    """The checks ``outcomes`` fail: a kill is a behavioural failure, a
    check that could not run is not (any such outcome: ``["unavailable"]``)."""
    if any(o.status == "unavailable" for o in outcomes):
        return ["unavailable"]
    return [c.name for c in fixed_checks(outcomes) if c.status == FAILED]
