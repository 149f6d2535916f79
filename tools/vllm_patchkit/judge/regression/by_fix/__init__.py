"""Each fix's own scenarios and mutants, one module (or package) per fix,
found by listing this package.

A module here is torch-free at import and exports, each optional:

- ``FACTS`` (per scenario it adds, the facts that must all be true on a
  fixed tree; the verdict judges them, see :func:`..verdict.facts_check`)
  with ``RUNS``, the dotted name of the module that runs them (its
  ``SCENARIOS``, by name; it imports torch and vLLM, and may import its
  ``FACTS`` module);
- ``MUTATION``, the dotted name of the module of its mutation tier's
  targets and mutants (``TARGETS``, ``FILE_MUTANTS``; see
  :mod:`vllm_patchkit.judge.mutation.targets`, which collects them);
- ``UPSTREAM``, the dotted name of the module that holds the mutants its
  upstream test alone must kill (``UPSTREAM_FILE``, ``UPSTREAM_TESTS``,
  ``upstream_mutants``; see :mod:`vllm_patchkit.judge.mutation.upstream_test`),
  with ``FIX``, the registry's name of the fix it serves.

Both are named, not imported, here, so there is no cycle. So adding a fix's
scenarios and mutants is a module here (its runner and mutants beside it,
in a package ``by_fix/<fix>/`` or the same module), with no edit of the
suite's or the tier's shared files. Which fix a scenario judges is the
registry's word (``Fix.scenarios``, :mod:`vllm_overlay.fixes`).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any


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
    """FACTS and RUNS come together; a module exports them, MUTATION or both."""
    facts = isinstance(getattr(module, "FACTS", None), Mapping)
    runs = isinstance(getattr(module, "RUNS", None), str)
    mutation = isinstance(getattr(module, "MUTATION", None), str)
    if hasattr(module, "MUTATION") and not mutation:
        raise TypeError(f"{module.__name__}: MUTATION is not a module's name")
    if facts != runs:
        raise TypeError(f"{module.__name__} exports one of FACTS and RUNS only")
    if hasattr(module, "UPSTREAM") and not isinstance(
        getattr(module, "FIX", None), str
    ):
        raise TypeError(f"{module.__name__}: UPSTREAM without FIX, the fix's name")
    if not (facts or mutation):
        raise TypeError(f"{module.__name__} exports no FACTS and RUNS, no MUTATION")


MODULES = _modules()


def _facts() -> dict[str, tuple[str, ...]]:
    facts: dict[str, tuple[str, ...]] = {}
    for module in MODULES:
        if not hasattr(module, "FACTS"):
            continue
        clash = facts.keys() & module.FACTS.keys()
        if clash:
            raise ValueError(f"{module.__name__} names scenarios again: {clash}")
        facts.update(module.FACTS)
    return facts


FACTS: dict[str, tuple[str, ...]] = _facts()
"""Per scenario of every fix module, the facts a fixed tree shows (all true)."""


def scenarios() -> dict[str, Callable[..., Any]]:
    """Every fix module's scenarios, by name (imports torch and vLLM)."""
    runs = [
        importlib.import_module(m.RUNS).SCENARIOS for m in MODULES if hasattr(m, "RUNS")
    ]
    return {name: run for scenarios in runs for name, run in scenarios.items()}


MUTATIONS: tuple[str, ...] = tuple(
    m.MUTATION for m in MODULES if hasattr(m, "MUTATION")
)
"""The dotted names of the fixes' mutation modules, in this package's order."""

UPSTREAM: dict[str, str] = {
    m.FIX: m.UPSTREAM for m in MODULES if hasattr(m, "UPSTREAM")
}
"""Per fix (its registry name) whose upstream test is measured alone, the
dotted name of the module of its upstream mutants."""
