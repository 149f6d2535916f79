"""What one fix is: its record, its patch rules, and how to decide and install it.

A fix is one module of :mod:`vllm_overlay.fixes` exporting ``FIX``: it gives
how one file of its code decides (:attr:`Fix.decide`) and names its install
module; the base gives the rest. The install side is imported only when the
plugin asks for it (:func:`deferred`), never by the registry: ``check``
reads records and code only, in a pre-commit hook that pays for every import.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from vllm_overlay.installed import NOT_INSTALLED, source_file, vllm_version
from vllm_overlay.state import Action, InstallState, action_for

TYPE_CHECKING = False  # typing costs every start-up; annotations only
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path
    from types import ModuleType
    from typing import Any

    from vllm_overlay.code import Code
    from vllm_overlay.record import PatchTarget
    from vllm_overlay.state import Plan

    Before = Mapping[str, InstallState]
    """The decisions, by fix name, of the fixes this one ``needs``."""


CAPTURE_SPEED = (
    "capture speed, as the code's comment says: with seq_lens at max_model_len "
    "graph capture is very slow, so the capture build sets the (device) "
    "seq_lens its metadata aliases to 1; the runner fills the buffer again "
    "before every replay; a length of 1 is a valid batch for any backend"
)
"""Why a backend's capture build sets ``seq_lens`` to 1 (upstream, on purpose)."""
BACKENDS = "vllm/v1/attention/backends"


@dataclass(frozen=True)
class IntentionalWrite:
    """A shared write upstream made on purpose (the audit's band-aids:
    ``intentional`` for the backend it was made for)."""

    file: str
    method: str
    field: str
    operations: tuple[str, ...]
    reason: str
    guards: str = ""
    """What another backend's reader gets, when the write guards its own
    backend's kernel only; empty for a value every backend can run on."""

    @classmethod
    def capture_speed(cls, file: str, builder: str) -> IntentionalWrite:
        """``builder``'s capture build filling ``seq_lens`` with 1 (``file``:
        the backend's file name)."""
        method = f"{builder}.build_for_cudagraph_capture"
        return cls(f"{BACKENDS}/{file}", method, "seq_lens", ("fill_",), CAPTURE_SPEED)


@dataclass(frozen=True)
class Fix:
    """One upstream fix the overlay and the series carry for older vLLMs."""

    order: int
    """Where the fix comes among the others (after what it ``needs``)."""
    record: PatchTarget
    """What it patches, why, how, for which releases, and when it goes."""
    pr: str
    """The upstream PR it stands for (``#51585``): its label in reports."""
    install: str
    """Its install module: ``install(module, state)`` (armed by :attr:`arm`)
    and ``is_installed_on(module)``."""
    decide: Callable[..., InstallState]
    """The decision on one file of its code (:attr:`record`'s ``source_file``)
    of a vLLM version, ``(file, version)``; a fix that :attr:`needs` others
    also gets their decisions (``before``)."""
    read_tree: Callable[[Path], Code] | None = None
    """How its code reads in the vLLM source tree at a path: the toolkit
    checks it against the releases its record names (a fork's stale tag)."""
    needs: tuple[str, ...] = ()
    """Fixes whose decisions this one reads (decided first, passed in)."""
    also: Callable[[InstallState], None] | None = None
    """Runs after the decision unless the fix is disabled (an opt-in riding
    on it); a failure is the fix's, as for :attr:`arm`."""
    what: str = ""
    """Names the fix in shared log messages ("" for the first fix)."""
    rules: str = ""
    """The module whose ``RULES`` (one
    :class:`~vllm_overlay.patch_rules.PatchRule` per ``Invariant:``) read its
    patches on a source tree. Named, not imported: the plugin never needs them."""
    review: str = ""
    """The module whose ``NOTES`` (markdown: the PR body's Details) are for an
    upstream reviewer; empty: none. Named: only the toolkit's ``pr`` reads them."""
    intentional_writes: tuple[IntentionalWrite, ...] = ()
    """Shared writes in its code that upstream made on purpose and the fix
    keeps: the audit calls them intentional, not harmful."""

    @property
    def name(self) -> str:
        """The one key for code, reports and ``VLLM_OVERLAY_DISABLE``."""
        return self.record.name

    def assess(self, before: Before | None = None) -> InstallState:
        """The decision for the vLLM this interpreter would import (AST only;
        ABSENT where that vLLM has no such module)."""
        version = vllm_version()
        file = source_file(self.module)
        if file is None:
            return self.state(
                Action.ABSENT, version, f"vLLM {version} has no {self.module}"
            )
        return self._decide(file, version, before)

    def assess_tree(
        self, root: Path, version: str, before: Before | None = None
    ) -> InstallState:
        """The decision for the vLLM source tree at ``root``, of ``version``
        (ABSENT where the tree has no such file)."""
        file = root / self.record.source_file
        if not file.is_file():
            why = f"no {self.record.source_file} in {root}"
            return self.state(Action.ABSENT, version, why)
        return self._decide(file, version, before)

    def _decide(self, file: Path, version: str, before: Before | None) -> InstallState:
        if self.needs:
            return self.decide(file, version, before or {})
        return self.decide(file, version)

    @property
    def arm(self) -> Callable[[InstallState], None]:
        """Install the fix when vLLM imports :attr:`module` (INSTALLED only)."""
        return deferred("vllm_overlay.arming", "arm")

    @property
    def installed_on(self) -> Callable[[ModuleType], bool]:
        """Whether vLLM's loaded module carries the fix."""
        return deferred(self.install, "is_installed_on")

    @property
    def module(self) -> str:
        return self.record.module

    def affected(self, state: InstallState, release: str | None) -> bool | None:
        """Whether the code read needs this fix (None: cannot judge). A
        missing target is "cannot judge" (a fork may have moved the code,
        still buggy) unless ``release``, a version the tree vouches for, is
        older than every release the bug is in: that release never had it."""
        if state.action is not Action.ABSENT:
            return state.affected
        if release == NOT_INSTALLED:
            return False  # no vLLM here: nothing to fix
        if release is not None and self.record.predates(release):
            return False
        return None

    def state(
        self,
        action: Action,
        version: str,
        reason: str,
        code: Code | None = None,
        **more: Any,
    ) -> InstallState:
        """A decision of this fix's (``more``: the other fields of the state)."""
        return InstallState(action, version, reason, code, name=self.name, **more)

    def left_alone(self, version: str, code: Code | None, why: str) -> InstallState:
        """Code it cannot prove it may change: left exactly as it was."""
        return self.state(Action.UNRECOGNISED, version, f"left as it is: {why}", code)

    def decided(
        self, version: str, code: Code, plan: Callable[[], Plan] | None = None
    ) -> InstallState:
        """The decision its code's shape makes: the known bug installed as
        ``plan`` makes it (what the install will do; refused, it is left
        alone), a shape it cannot prove left alone, naming the file and line."""
        action = action_for(code.shape)
        if action is Action.UNRECOGNISED:
            why = code.detail
            if str(code.file) not in why:
                where = f"{code.file}:{code.line}" if code.line else str(code.file)
                why = f"{where}: {why}"
            return self.left_alone(
                version, code, f"unrecognised {code.shape} code: {why}"
            )
        if action is not Action.INSTALLED or plan is None:
            return self.state(action, version, code.detail, code)
        from vllm_overlay.proof import FixRefused

        try:
            made = plan()
        except FixRefused as exc:
            return self.left_alone(version, code, str(exc))
        return self.state(
            action, version, made.summary, code, covered=self.record.reaches, plan=made
        )


def deferred(module: str, name: str) -> Callable[..., Any]:
    """Function ``name`` of ``module``, imported at its first call (a fix's
    install side: only the plugin and the doctors need it)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__module__ = module
    return call
