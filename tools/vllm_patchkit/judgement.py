"""The one verdict vocabulary: fixed, not fixed, cannot judge, and its exit code.

Every judge in the toolkit (the regression suite, ``verify`` and so ``test``,
``demo``, ``pr``, the matrix, the overlay probe, the audit) answers with a
:class:`Verdict`, and every exit code that reports a verdict is
:attr:`Verdict.exit_code`, derived from :mod:`vllm_patchkit.errors`. JSON
carries the value (``cannot-judge``); running text, table cells and the
audit's and overlay probe's own reports the words (``cannot judge``).

This module imports only :mod:`vllm_patchkit.errors`: the lowest layer that
needs a verdict (the suite's child process) can import it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from vllm_patchkit.errors import EXIT_ERROR, EXIT_FAILED, EXIT_OK


class Verdict(enum.StrEnum):
    FIXED = "fixed"
    NOT_FIXED = "not-fixed"
    CANNOT_JUDGE = "cannot-judge"
    """Nothing failed, but something the verdict rests on could not run:
    what did not run is never a pass."""

    @property
    def exit_code(self) -> int:
        """0 fixed, 1 not fixed, 3 cannot judge (:mod:`vllm_patchkit.errors`)."""
        return _EXIT[self]

    @property
    def words(self) -> str:
        """The verdict in running text: ``cannot judge``."""
        return self.value.replace("-", " ")

    @property
    def heading(self) -> str:
        """The verdict as a report's last line shows it: ``CANNOT JUDGE``."""
        return self.words.upper()

    @classmethod
    def read(cls, word: str) -> Verdict | None:
        """The verdict ``word`` spells, in either form; None for another word
        (a matrix cell's ``passes``, the probe's ``inert``)."""
        for verdict in cls:
            if word in (verdict.value, verdict.words):
                return verdict
        return None


_EXIT = {
    Verdict.FIXED: EXIT_OK,
    Verdict.NOT_FIXED: EXIT_FAILED,
    Verdict.CANNOT_JUDGE: EXIT_ERROR,
}


@dataclass(frozen=True)
class Judgement:
    """One tree's answer: the verdict, why, and whether the bug reproduced
    there (a not-fixed tree whose host offsets the capture zeroes)."""

    verdict: Verdict
    why: str
    bug_reproduced: bool = False

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code

    @property
    def fixed(self) -> bool:
        return self.verdict is Verdict.FIXED
