"""Does a vLLM need each fix, is it protected, and what is its word: one logic.

Both doctors (``python -m vllm_overlay`` for the installed vLLM,
``vllm-patchkit doctor`` for any tree) read each fix's decision into a
:class:`Finding` here and take the vLLM's word from :func:`deciding`, so
the two never judge one tree two ways.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from vllm_overlay.fixes import by_name, off_reason
from vllm_overlay.state import Action, InstallState


class Word(Protocol):
    """A fix's word on one vLLM, as any doctor presents it."""

    @property
    def affected(self) -> bool | None: ...

    @property
    def protected(self) -> bool: ...


W = TypeVar("W", bound=Word)


@dataclass
class Finding:
    """One fix on one vLLM: whether it needs it, and what the overlay does."""

    name: str
    pr: str
    affected: bool | None
    """None: cannot judge (the file does not parse, its shape is not proven,
    or the target is missing from a vLLM that may have had it)."""
    shape: str
    detail: str
    """What the code says (else why there is no code to read)."""
    file: str
    line: int | None
    action: Action
    reason: str
    """Why the overlay decides :attr:`action`."""
    off: str | None
    """Why vLLM started in this environment would not run the fix (None: it
    would)."""
    entry_point: bool
    """The vLLM is the installed one, with the overlay's entry point
    registered (a tree given by path is protected only by patching it)."""
    active: bool | None = None
    """Whether this process shows the fix installed on vLLM (None: not
    looked at; only the overlay's doctor loads vLLM's plugins)."""

    @classmethod
    def of(
        cls,
        state: InstallState,
        release: str | None,
        entry_point: bool,
        root: Path | None = None,
    ) -> Finding:
        """``state``'s fix, judged by the release the vLLM vouches for
        (:meth:`~vllm_overlay.fixes.base.Fix.affected`); ``root``: the tree's
        root, to name the file a missing target would be in."""
        fix = by_name(state.name)
        code = state.code
        file = code.file if code is not None else None
        if file is None and root is not None:
            file = root / fix.record.source_file
        return cls(
            name=fix.name,
            pr=fix.pr,
            affected=fix.affected(state, release),
            shape=str(code.shape) if code is not None else "missing",
            detail=code.detail if code is not None else state.reason,
            file=str(file) if file is not None else "",
            line=code.line if code is not None else None,
            action=state.action,
            reason=state.reason,
            off=off_reason(fix.name),
            entry_point=entry_point,
        )

    @property
    def would_install(self) -> bool:
        """vLLM started here installs it: the overlay's entry point
        registered, nothing turning it off, and its decision to install."""
        return self.entry_point and self.action is Action.INSTALLED and self.off is None

    @property
    def protected(self) -> bool:
        """Safe from the fix's bug: not affected, or the fix on (what this
        process shows once looked at, else what vLLM started here would
        do). A fix that cannot be judged is never safe."""
        if self.affected is None:
            return False
        if self.affected is False:
            return True
        if self.active is not None:
            return self.active
        return self.would_install

    def decision(self, configured: bool = True) -> str:
        """The overlay's word for it; ``configured``: as vLLM started in this
        environment takes it, else what the overlay does to that code."""
        return "disabled" if configured and self.off else str(self.action)


def deciding(words: list[W]) -> W:
    """The fix whose word is the vLLM's: the first needed and not protected
    (whatever else cannot be read: a failure outranks what could not run,
    as in the regression verdict), else the first that cannot be judged,
    else the first needed, else the first."""
    return next(
        (w for w in words if w.affected and not w.protected),
        next(
            (w for w in words if w.affected is None),
            # None needed: any fix's code says so; the registry's order picks.
            next((w for w in words if w.affected), words[0]),
        ),
    )
