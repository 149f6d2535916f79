"""A check: one scenario's outcome at one query length, passed, failed or not run.

The words every verdict is given in, and how an error is told; torch-free,
so that each fix's own judge (:mod:`.by_fix`) and the suite's verdict
(:mod:`.verdict`) share them without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PASSED, FAILED, NOT_RUN = "passed", "failed", "not run"
HARNESS_ERROR = "harness error"


def check_name(scenario: str, decode_query_len: int) -> str:
    return f"{scenario}[q={decode_query_len}]"


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    """``passed``, ``failed`` (the behaviour is wrong: a kill, a bad verdict)
    or ``not run`` (the detail says why: absent here, or a harness error)."""
    detail: str
    fix: str
    """The fix this check judges, by its PR label (:func:`.verdict.fix_of`)."""
    applies: bool = True
    """False when the tree lacks what the check exercises (a tree without
    MiniMax-M3): it still counts as not run, but a core check that does not
    apply is not required for a verdict (see :func:`.verdict.judge`)."""

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "passed": self.passed,
            "detail": self.detail,
            "fix": self.fix,
            "applies": self.applies,
        }


def status_of_result(ok: bool) -> str:
    return PASSED if ok else FAILED


def harness_error(error: dict[str, Any] | None) -> str:
    """A check the harness failed to run: ``harness error: ...``; for a
    set-up step that failed (:func:`.records.setting_up`), which step, and
    that the check cannot judge (it never saw the behaviour)."""
    step = (error or {}).get("step")
    said = f"cannot judge: could not {step}: " if step else ""
    return f"{HARNESS_ERROR}: {said}{describe_error(error)}"


def describe_error(error: dict[str, Any] | None) -> str:
    error = error or {}
    where = f"{error.get('relpath')}:{error.get('line')}"
    text = error.get("source") or str(error.get("message", ""))[:120]
    return f"{error.get('type')} at {where}: {text}"
