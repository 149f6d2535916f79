"""The mutation tier's targets and mutants, collected from every fix.

Each fix declares its own: its module in
:mod:`vllm_patchkit.judge.regression.by_fix` names (``MUTATION``) a module
that exports ``TARGETS`` (its files under mutation, each a
:class:`.file_mutants.Target`) and ``FILE_MUTANTS`` (a
:class:`.file_mutants.FileMutant` per mutant, each of one of those
targets). This module only lists them, in ``by_fix``'s order, so a fix's
mutants join the tier with no edit here; the runner and the worker read
only these.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType

from vllm_patchkit.judge.mutation.file_mutants import FileMutant, Target
from vllm_patchkit.judge.regression import by_fix


@dataclass(frozen=True)
class Tier:
    targets: tuple[Target, ...]
    mutants: tuple[FileMutant, ...]


def collect(modules: Iterable[ModuleType]) -> Tier:
    """Every fix's ``TARGETS`` and ``FILE_MUTANTS``, checked: each mutant is
    of a target its own fix declares, no key, file or mutant name twice."""
    targets: list[Target] = []
    mutants: list[FileMutant] = []
    for module in modules:
        own = tuple(getattr(module, "TARGETS", ()))
        made = tuple(getattr(module, "FILE_MUTANTS", ()))
        if not own or not all(isinstance(t, Target) for t in own):
            raise TypeError(f"{module.__name__} declares no TARGETS (Target)")
        if not all(isinstance(m, FileMutant) for m in made):
            raise TypeError(f"{module.__name__}: FILE_MUTANTS are not FileMutant")
        stray = [m.name for m in made if m.target not in own]
        if stray:
            raise ValueError(
                f"{module.__name__}: mutants of a target it does not declare: {stray}"
            )
        targets += own
        mutants += made
    for what, values in (
        ("target key", [t.key for t in targets]),
        ("target file", [str(t.relpath) for t in targets]),
        ("mutant name", [m.name for m in mutants]),
    ):
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            raise ValueError(f"a {what} declared twice: {twice}")
    return Tier(tuple(targets), tuple(mutants))


TIER = collect(importlib.import_module(name) for name in by_fix.MUTATIONS)
TARGETS: tuple[Target, ...] = TIER.targets
"""Every fix's files under mutation."""
ALL_MUTANTS: tuple[FileMutant, ...] = TIER.mutants
"""Every fix's mutants, as the tier runs them."""
