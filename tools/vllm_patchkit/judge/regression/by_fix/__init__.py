"""Each fix's own scenarios, one module per fix, found by listing this package.

A module here is torch-free at import: it exports ``FACTS`` (per scenario
it adds, the facts that must all be true on a fixed tree; the verdict
judges them, see :func:`..verdict.facts_check`) and ``RUNS``, the dotted
name of the module that runs them (its ``SCENARIOS``, by name; it imports
torch and vLLM, and may import its ``FACTS`` module: named, not imported,
here, so there is no cycle). So adding a fix's
scenarios is a module here (and one beside :mod:`..scenarios` that runs
them), with no edit of the suite's shared files. Which fix a scenario
judges is the registry's word (``Fix.scenarios``, :mod:`vllm_overlay.fixes`).
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
        if not isinstance(getattr(module, "FACTS", None), Mapping) or not isinstance(
            getattr(module, "RUNS", None), str
        ):
            raise TypeError(f"{module.__name__} exports no FACTS and RUNS")
        found.append(module)
    return tuple(found)


MODULES = _modules()


def _facts() -> dict[str, tuple[str, ...]]:
    facts: dict[str, tuple[str, ...]] = {}
    for module in MODULES:
        clash = facts.keys() & module.FACTS.keys()
        if clash:
            raise ValueError(f"{module.__name__} names scenarios again: {clash}")
        facts.update(module.FACTS)
    return facts


FACTS: dict[str, tuple[str, ...]] = _facts()
"""Per scenario of every fix module, the facts a fixed tree shows (all true)."""


def scenarios() -> dict[str, Callable[..., Any]]:
    """Every fix module's scenarios, by name (imports torch and vLLM)."""
    runs = [importlib.import_module(m.RUNS).SCENARIOS for m in MODULES]
    return {name: run for scenarios in runs for name, run in scenarios.items()}
