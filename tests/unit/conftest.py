"""Fixtures for the unit tier."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

ModuleFromSource = Callable[[str, str], tuple[ModuleType, Path]]


@pytest.fixture
def module_from_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> ModuleFromSource:
    """Factory: import ``source`` as module ``name`` from a file in tmp_path.

    The module is in ``sys.modules`` (as a real import leaves it: ``inspect``
    and the overlay's source checks look it up there) for this test only;
    monkeypatch takes it out again, so no later test imports a module whose
    file is gone.
    """

    def load(source: str, name: str) -> tuple[ModuleType, Path]:
        file = tmp_path / f"{name}.py"
        file.write_text(source)
        spec = importlib.util.spec_from_file_location(name, file)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, name, module)
        spec.loader.exec_module(module)
        return module, file

    return load
