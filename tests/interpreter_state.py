"""Each test leaves the interpreter as it found it.

Tests share a worker process with whatever xdist and the random order put
before them, so state one test changes for the whole interpreter decides
what the next one sees: an import that shadows a module, an entry left on
``sys.path`` or ``sys.meta_path``, an environment variable, the working
directory. This plugin takes a snapshot of that state before each test and
compares after it (after the test's own fixtures are torn down): a test
that leaves a change fails, naming it, and the state is put back, so that
the failure stays with the test that caused it instead of surfacing, by
chance of scheduling, in a test that imports vLLM later.

Imports that only add modules from the environment are allowed (a module
imported once stays imported); what is not: a module removed from or
replaced in ``sys.modules``, or one added from the test's temporary files.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

PYTEST_OWN = frozenset({"PYTEST_CURRENT_TEST"})
"""Set by pytest itself around each phase of a test."""


@dataclass(frozen=True)
class Snapshot:
    cwd: str
    environ: dict[str, str]
    path: list[str]
    meta_path: list[object]
    finder_states: list[tuple[object, dict[str, object]]]
    path_hooks: list[object]
    modules: dict[str, ModuleType]

    @classmethod
    def take(cls) -> Snapshot:
        return cls(
            cwd=os.getcwd(),
            environ=_environ(),
            path=list(sys.path),
            meta_path=list(sys.meta_path),
            finder_states=_finder_states(),
            path_hooks=list(sys.path_hooks),
            modules=dict(sys.modules),
        )

    def changes(self, scratch: Path) -> list[str]:
        """What differs now, in words; empty when nothing does."""
        found: list[str] = []
        try:
            cwd = os.getcwd()
        except FileNotFoundError:
            cwd = "<a removed directory>"
        if cwd != self.cwd:
            found.append(f"working directory {self.cwd} -> {cwd}")
        environ = _environ()
        for name in sorted(set(self.environ) | set(environ)):
            if self.environ.get(name) != environ.get(name):
                found.append(f"environment variable {name} changed")
        for what, before, now in (
            ("sys.path", self.path, sys.path),
            ("sys.meta_path", self.meta_path, sys.meta_path),
            ("sys.path_hooks", self.path_hooks, sys.path_hooks),
        ):
            if len(before) != len(now) or any(
                a is not b for a, b in zip(before, now, strict=True)
            ):
                found.append(f"{what} changed: {before!r} -> {now!r}")
        if not found and _changed_finders(self.finder_states):
            found.append(
                "an import hook on sys.meta_path changed its state (pip imported "
                "in-process turns setuptools' distutils shim off for good)"
            )
        for name, module in self.modules.items():
            now_module = sys.modules.get(name)
            if now_module is None:
                found.append(f"module {name} removed from sys.modules")
            elif now_module is not module:
                found.append(f"module {name} replaced in sys.modules")
        for name in _added_from(scratch, self.modules):
            found.append(f"module {name} imported from the test's temporary files")
        return found

    def restore(self, scratch: Path) -> None:
        """Put everything :meth:`changes` looks at back as it was."""
        os.chdir(self.cwd)
        for name in set(_environ()) - set(self.environ):
            del os.environ[name]
        os.environ.update(self.environ)
        sys.path[:] = self.path
        sys.meta_path[:] = self.meta_path
        sys.path_hooks[:] = self.path_hooks
        for finder, state in self.finder_states:
            vars(finder).clear()
            vars(finder).update(state)
        for name in _added_from(scratch, self.modules):
            del sys.modules[name]
        sys.modules.update(self.modules)


def _finder_states() -> list[tuple[object, dict[str, object]]]:
    """Each finder object on ``sys.meta_path`` with a copy of its attributes.

    setuptools' distutils finder turns itself off by setting an attribute
    when anything looks for ``pip`` (pypa/pip#8761); after that the next
    ``import setuptools`` in the process fails. Classes (the editable
    installs' finders) keep no state; pytest's own hook keeps caches."""
    return [
        (finder, dict(vars(finder)))
        for finder in sys.meta_path
        if not isinstance(finder, type)
        and hasattr(finder, "__dict__")
        and not type(finder).__module__.startswith("_pytest")
    ]


def _changed_finders(before: list[tuple[object, dict[str, object]]]) -> bool:
    return any(
        vars(finder).keys() != state.keys()
        or any(vars(finder)[k] is not v for k, v in state.items())
        for finder, state in before
    )


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in PYTEST_OWN}


def _added_from(scratch: Path, before: dict[str, ModuleType]) -> list[str]:
    """Modules imported since ``before`` whose file lies under ``scratch``."""
    root = str(scratch)
    added = []
    for name, module in list(sys.modules.items()):
        if name in before:
            continue
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and file.startswith(root):
            added.append(name)
    return added


@pytest.fixture(autouse=True)
def _interpreter_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Autouse and defined first: set up before the test's own fixtures and
    torn down after them, so a fixture that restores in teardown is fine."""
    scratch = tmp_path_factory.getbasetemp()
    before = Snapshot.take()
    yield
    changes = before.changes(scratch)
    if changes:
        before.restore(scratch)
        pytest.fail(
            "the test left interpreter-wide state changed (restored now):\n  "
            + "\n  ".join(changes),
            pytrace=False,
        )
