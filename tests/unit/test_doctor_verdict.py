"""The toolkit doctor's word over several fixes, by the rule every judge uses.

The regression verdict and the overlay's own doctor let a definite failure
outrank what could not run; the toolkit doctor once put "cannot judge" first,
so a tree that surely needed StaticSink, beside a rocm_attn.py it could not
read, exited 3 while ``python -m vllm_overlay`` said "affected: yes". These
are the rule's cases on the doctor's own records (the trees behind them:
test_doctor_unparseable.py, test_doctor_unproven.py, test_fork_verdicts.py).
"""

from __future__ import annotations

import pytest

from vllm_patchkit.commands.doctor import verdict
from vllm_patchkit.judge.doctor import Diagnosis, FixStatus
from vllm_patchkit.judgement import Verdict

NEEDED_OPEN = dict(affected=True, protected=False)
NEEDED_PATCHED = dict(affected=True, protected=True)
NOT_NEEDED = dict(affected=False, protected=True)
UNREAD = dict(affected=None, protected=False)


def fixes(*words: dict[str, object]) -> list[FixStatus]:
    return [
        FixStatus(f"fix-{i}", patch=f"000{i}", patch_state="-", detail="", **w)  # type: ignore[arg-type]
        for i, w in enumerate(words)
    ]


def diagnosis(statuses: list[FixStatus]) -> Diagnosis:
    return Diagnosis.over(statuses, target="tree", vllm_version="0.28.0")


@pytest.mark.parametrize(
    ("words", "expected", "affected", "decides"),
    [
        ((UNREAD, NEEDED_OPEN), Verdict.NOT_FIXED, True, "fix-1"),
        ((NEEDED_OPEN, UNREAD), Verdict.NOT_FIXED, True, "fix-0"),
        ((UNREAD, NEEDED_PATCHED), Verdict.CANNOT_JUDGE, None, "fix-0"),
        ((UNREAD, NOT_NEEDED), Verdict.CANNOT_JUDGE, None, "fix-0"),
        ((NOT_NEEDED, NEEDED_PATCHED), Verdict.FIXED, True, "fix-1"),
        ((NOT_NEEDED, NOT_NEEDED), Verdict.FIXED, False, "fix-0"),
        ((NEEDED_PATCHED, NEEDED_OPEN), Verdict.NOT_FIXED, True, "fix-1"),
    ],
)
def test_a_needed_open_fix_outranks_one_that_cannot_be_read(
    words: tuple[dict[str, object], ...],
    expected: Verdict,
    affected: bool | None,
    decides: str,
) -> None:
    result = diagnosis(fixes(*words))
    assert verdict(result) is expected
    assert (
        verdict(result).exit_code
        == {
            Verdict.FIXED: 0,
            Verdict.NOT_FIXED: 1,
            Verdict.CANNOT_JUDGE: 3,
        }[expected]
    )
    assert result.affected is affected
    assert result.fix == decides
    # The tree's line is one fix's: its word, its code.
    assert next(f for f in result.fixes if f.fix == decides).affected is affected
