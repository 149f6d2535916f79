"""What the overlay decided for one fix, and what became of it in this process.

Every fix's decision has the same shape (:class:`InstallState`), whatever
code it inspects: the plugin records one per fix, the doctors report them,
the matrix prints their :class:`Action` words.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from vllm_overlay.code import Shape

TYPE_CHECKING = False  # typing costs every start-up; annotations only
if TYPE_CHECKING:
    from typing import Protocol

    from vllm_overlay.code import Code

    class Plan(Protocol):
        """What a fix's install step will do."""

        @property
        def summary(self) -> str: ...


class Action(enum.StrEnum):
    """The overlay's decision for one fix on one vLLM (the matrix prints these)."""

    INSTALLED = "installed"
    """The known bug: the fix is armed, and installed when its module loads."""
    NOT_NEEDED = "not-needed"
    """The vLLM has the fix, or never had the bug."""
    DISABLED = "disabled"
    UNRECOGNISED = "unrecognised"
    """Code the overlay cannot prove it may change: left exactly as it was."""
    ABSENT = "absent"
    """No vLLM, or no module of the fix's in it."""


@dataclass
class InstallState:
    """One fix's decision and what became of it in this process."""

    action: Action
    vllm_version: str
    reason: str
    code: Code | None = None
    covered: tuple[str, ...] = ()
    applied_to_class: bool = False
    """True once vLLM's loaded code really carries the fix."""
    problems: list[str] = field(default_factory=list)
    kernel: str = "upstream"
    """Which prefix-prefill kernel vLLM's ROCm path calls: upstream or overlay."""
    plan: Plan | None = None
    """For INSTALLED: what the install step will do."""
    name: str = ""
    """The fix's name (:attr:`vllm_overlay.fixes.base.Fix.name`)."""

    @property
    def status(self) -> str:
        """What is true now: armed (waiting for the module), installed, ..."""
        if self.action is Action.INSTALLED:
            if self.applied_to_class:
                return "installed"
            return "refused" if self.problems else "armed"
        return str(self.action)

    @property
    def affected(self) -> bool | None:
        """Does the code inspected need the fix (None: cannot judge)?"""
        if self.code is None:
            return False if self.action is Action.ABSENT else None
        return self.code.affected if self.code.judged else None


def action_for(shape: Shape) -> Action:
    """The overlay's decision for the shape of a fix's code, before planning:
    only the known bug is patched, and code it cannot prove is left alone."""
    return {
        Shape.BUGGY: Action.INSTALLED,
        Shape.FIXED: Action.NOT_NEEDED,
        Shape.NOT_FOR: Action.NOT_NEEDED,
        Shape.MISSING: Action.ABSENT,
    }.get(shape, Action.UNRECOGNISED)
