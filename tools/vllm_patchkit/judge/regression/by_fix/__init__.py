"""Each fix's own scenarios and mutants, one module (or package) per fix,
found by listing this package.

A module here is torch-free at import and exports ``FIX``, the registry's
name of the fix it serves (scenarios run in the registry's order of fixes),
and, each optional:

- ``SCENARIOS``, the names of the scenarios that judge its fix (every
  scenario is one fix's: one no module names is an error), and ``CORE``,
  those without which the fix is never called fixed;
- ``RUNS``, the dotted name of the module that runs its scenarios (its
  ``SCENARIOS``, by name; it imports torch and vLLM), judged either by
  ``FACTS`` (per scenario, the facts that must all be true on a fixed tree;
  see :func:`..verdict.fixed_checks`) or by ``CHECKS``, the dotted name of a
  torch-free module whose ``check(outcome, fix)`` judges each outcome once
  the rules every scenario shares have had their say;
- ``RECIPES``, the dotted name of a module whose ``RECIPES`` maps builders
  (by qualified name) to how its scenarios make them
  (:class:`..recipes.Recipe`; the audit makes them the same way);
- ``MUTATION``, the dotted name of the module of its mutation tier's
  targets and mutants (``TARGETS``, ``FILE_MUTANTS``; see
  :mod:`vllm_patchkit.judge.mutation.targets`, which collects them);
- ``UPSTREAM``, the dotted name of the module that holds the mutants its
  upstream test alone must kill (``UPSTREAM_FILE``, ``UPSTREAM_TESTS``,
  ``upstream_mutants``; see :mod:`vllm_patchkit.judge.mutation.upstream_test`).

Each is named, not imported, here, so there is no cycle, and adding a
fix's scenarios and mutants edits none of the suite's or the tier's shared
files.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import Any

from vllm_overlay.fixes import FIXES as REGISTRY

_ORDER = {fix.name: index for index, fix in enumerate(REGISTRY)}


def _modules() -> tuple[ModuleType, ...]:
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        _check(module)
        found.append(module)
    return tuple(found)


def _check(module: ModuleType) -> None:
    """A module names its fix; RUNS comes with FACTS or CHECKS, never alone."""
    name = module.__name__
    if getattr(module, "FIX", None) not in _ORDER:
        raise TypeError(f"{name}: FIX is no fix of the registry (vllm_overlay/fixes)")
    for key in ("RUNS", "CHECKS", "RECIPES", "MUTATION", "UPSTREAM"):
        if hasattr(module, key) and not isinstance(getattr(module, key), str):
            raise TypeError(f"{name}: {key} is not a module's name")
    facts = isinstance(getattr(module, "FACTS", None), Mapping)
    judged = facts or hasattr(module, "CHECKS")
    if hasattr(module, "RUNS") != judged:
        raise TypeError(f"{name}: RUNS comes with FACTS or CHECKS, and they with it")
    if not (judged or hasattr(module, "MUTATION")):
        raise TypeError(f"{name} exports no scenarios (RUNS) and no MUTATION")


MODULES = _modules()


def _merged(parts: Iterable[tuple[ModuleType, Mapping[str, Any]]]) -> dict[str, Any]:
    """The modules' per-scenario entries in one map; no scenario named twice."""
    merged: dict[str, Any] = {}
    for module, part in parts:
        clash = merged.keys() & part.keys()
        if clash:
            raise ValueError(f"{module.__name__} names scenarios again: {clash}")
        merged.update(part)
    return merged


FACTS: dict[str, tuple[str, ...]] = _merged(
    (m, m.FACTS) for m in MODULES if hasattr(m, "FACTS")
)
"""Per scenario of every fix module, the facts a fixed tree shows (all true)."""
_OWNERS: dict[str, str] = _merged(
    (m, dict.fromkeys(getattr(m, "SCENARIOS", ()), m.FIX)) for m in MODULES
)


class UnattributedScenarioError(LookupError):
    """A scenario no fix names: no fix is judged by it."""


def owner_of(scenario: str) -> str:
    """The fix (its registry name) whose module names ``scenario``; never a
    default fix's."""
    if scenario not in _OWNERS:
        raise UnattributedScenarioError(
            f"scenario {scenario!r} is named by no fix; list it in one fix's "
            "SCENARIOS (judge/regression/by_fix)"
        )
    return _OWNERS[scenario]


def scenarios_of(fix: str) -> tuple[str, ...]:
    """The scenarios that judge ``fix`` (its registry name)."""
    return tuple(name for name, owner in _OWNERS.items() if owner == fix)


def core_of(fix: str) -> tuple[str, ...]:
    """Of those, the ones without which ``fix`` is never called fixed."""
    return tuple(n for m in MODULES if fix == m.FIX for n in getattr(m, "CORE", ()))


def scenarios() -> dict[str, Callable[..., Any]]:
    """Every fix module's scenarios, by name, the fixes in the registry's
    order (imports torch and vLLM)."""
    runs = [
        importlib.import_module(m.RUNS).SCENARIOS
        for m in sorted(MODULES, key=lambda m: _ORDER[m.FIX])
        if hasattr(m, "RUNS")
    ]
    return {name: run for scenarios in runs for name, run in scenarios.items()}


@functools.cache
def checks_of(fix: str) -> Callable[..., Any] | None:
    """The ``check`` of the module that judges ``fix``'s scenarios (its
    registry name) by a rule of its own, or None (facts judge them)."""
    for module in MODULES:
        if fix == module.FIX and hasattr(module, "CHECKS"):
            return importlib.import_module(module.CHECKS).check
    return None


def recipes() -> dict[str, Any]:
    """Every fix module's builder recipes, by the builder's qualified name
    (imports torch and vLLM)."""
    found: dict[str, Any] = {}
    for module in MODULES:
        if hasattr(module, "RECIPES"):
            found.update(importlib.import_module(module.RECIPES).RECIPES)
    return found


MUTATIONS: tuple[str, ...] = tuple(
    m.MUTATION for m in MODULES if hasattr(m, "MUTATION")
)
"""The dotted names of the fixes' mutation modules, in this package's order."""

UPSTREAM: dict[str, str] = {
    m.FIX: m.UPSTREAM for m in MODULES if hasattr(m, "UPSTREAM")
}
"""Per fix (its registry name) whose upstream test is measured alone, the
dotted name of the module of its upstream mutants."""
