"""What one fix is: its record, its patch rules, and how to decide and install it.

A fix is one module of :mod:`vllm_overlay.fixes` exporting ``FIX``; the
registry finds it there, so adding a fix is that module plus its patches
(each belongs to the fix whose rule its ``Invariant:`` trailer names).
A fix gives how one file of its code decides (:attr:`Fix.decide`) and names
its install module; the base gives the rest of the skeleton (the decision
on the installed vLLM and on a tree, arming, the check on vLLM's loaded
module). Its install side (the ``install`` module of its folder: arming,
proofs, ``logging``) is imported when the plugin asks for it
(:func:`deferred`), never by the registry: ``check`` reads records and
code only, in a pre-commit hook that pays for every import.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from vllm_overlay.installed import NOT_INSTALLED, source_file, vllm_version
from vllm_overlay.state import Action, InstallState

TYPE_CHECKING = False  # typing costs every start-up; annotations only
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path
    from types import ModuleType
    from typing import Any

    from vllm_overlay.code import Code
    from vllm_overlay.record import PatchTarget

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
    """Its install module (dotted name): ``arm(state)`` installs the fix when
    vLLM imports :attr:`module` (INSTALLED only), ``is_installed_on(module)``
    says whether vLLM's loaded module carries it."""
    decide: Callable[[Path, str], InstallState] | None = None
    """The decision on one file of its code (:attr:`record`'s ``source_file``)
    of a vLLM version: what :meth:`assess` and :meth:`assess_tree` run."""
    assess_by: Callable[[Before | None], InstallState] | None = None
    """For a fix that reads others' decisions (:attr:`needs`) or more than one
    file: its own decision on the installed vLLM, in place of :attr:`decide`."""
    assess_tree_by: Callable[[Path, str, Before | None], InstallState] | None = None
    """Its own decision on a tree, with :attr:`assess_by`."""
    read_tree: Callable[[Path], Code] | None = None
    """How its code reads in the vLLM source tree at a path (what
    :attr:`assess_tree` decides on): the toolkit checks it against the
    releases its record names, to tell a fork's stale tag."""
    needs: tuple[str, ...] = ()
    """Fixes whose decisions this one reads (decided first, passed in)."""
    scenarios: tuple[str, ...] = ()
    """The regression scenarios that judge it: every scenario is named by
    exactly one fix (one no fix names is an error)."""
    core_scenarios: tuple[str, ...] = ()
    """Of those, the ones without which it is never called fixed."""
    also: Callable[[InstallState], None] | None = None
    """Runs after the decision unless the fix is disabled (an opt-in riding
    on it); a failure is the fix's, as for :attr:`arm`."""
    what: str = ""
    """Names the fix in shared log messages ("" for the first fix)."""
    rules: str = ""
    """The module of its folder that reads its patches on a source tree
    (``RULES``, one :class:`~vllm_overlay.patch_rules.PatchRule` per
    ``Invariant:``): the toolkit's carry rules and invariants derive from
    them. Named, not imported: the plugin never needs them."""
    review: str = ""
    """The module of its folder holding its notes for an upstream reviewer
    (``NOTES``, markdown: the PR body's Details); empty: none. Named, not
    imported: only the toolkit's ``pr`` reads them."""
    intentional_writes: tuple[IntentionalWrite, ...] = ()
    """Shared writes in its code that upstream made on purpose and the fix
    keeps: the audit calls them intentional, not harmful."""

    def __post_init__(self) -> None:
        own = (self.assess_by is not None, self.assess_tree_by is not None)
        if (self.decide is None) != all(own) or any(own) != all(own):
            raise TypeError(
                f"{self.record.name}: give decide, or assess_by and assess_tree_by"
            )

    @property
    def name(self) -> str:
        """The one key for code, reports and ``VLLM_OVERLAY_DISABLE``."""
        return self.record.name

    def assess(self, before: Before | None = None) -> InstallState:
        """The decision for the vLLM this interpreter would import (AST only)."""
        if self.assess_by is not None:
            return self.assess_by(before)
        assert self.decide is not None
        return self.assess_installed(self.decide)

    def assess_tree(
        self, root: Path, version: str, before: Before | None = None
    ) -> InstallState:
        """The decision for the vLLM source tree at ``root``, of ``version``."""
        if self.assess_tree_by is not None:
            return self.assess_tree_by(root, version, before)
        assert self.decide is not None
        return self.assess_in(root, version, self.decide)

    @property
    def arm(self) -> Callable[[InstallState], None]:
        """Install the fix when vLLM imports :attr:`module` (INSTALLED only)."""
        return deferred(self.install, "arm")

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

    def assess_installed(
        self, decide: Callable[[Path, str], InstallState]
    ) -> InstallState:
        """``decide`` on the installed vLLM's file of :attr:`module` (ABSENT
        where that vLLM has no such module)."""
        version = vllm_version()
        file = source_file(self.module)
        if file is None:
            why = f"vLLM {version} has no {self.module}"
            return self.state(Action.ABSENT, version, why)
        return decide(file, version)

    def assess_in(
        self, root: Path, version: str, decide: Callable[[Path, str], InstallState]
    ) -> InstallState:
        """``decide`` on the record's file in the tree at ``root`` (ABSENT
        where the tree has none)."""
        file = root / self.record.source_file
        if not file.is_file():
            why = f"no {self.record.source_file} in {root}"
            return self.state(Action.ABSENT, version, why)
        return decide(file, version)

    def warn(self, state: InstallState) -> None:
        """Warn, when vLLM imports :attr:`module`, that the code was left alone."""
        from vllm_overlay.arming import warn_when_loaded  # the install side

        warn_when_loaded(state, self.module, self.what)

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


def deferred(module: str, name: str) -> Callable[..., Any]:
    """Function ``name`` of ``module``, imported at its first call.

    A fix's :attr:`Fix.arm`, :attr:`Fix.installed_on` and :attr:`Fix.also`
    live in its folder's ``install`` module, which the plugin and the
    doctors need and the registry's other readers never do.
    """

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__module__ = module
    return call
