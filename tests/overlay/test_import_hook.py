"""The import hook fires after the module's first import, whoever looked first.

vLLM and other plugins probe modules with ``importlib.util.find_spec`` before
importing them; a hook that spent itself on that look would never install
the fix. Real modules written to a scratch directory, imported for real.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from vllm_overlay.import_hook import _AfterImportFinder, after_import


@pytest.fixture
def module_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [n for n in sys.modules if n.startswith("hooked_")]:
        del sys.modules[name]
    hooks = [f for f in sys.meta_path if isinstance(f, _AfterImportFinder)]
    for finder in hooks:
        sys.meta_path.remove(finder)


def test_find_spec_before_import_keeps_the_hook(module_dir: Path) -> None:
    (module_dir / "hooked_probe.py").write_text("VALUE = 41\n")
    seen: list[int] = []

    def callback(module: ModuleType) -> None:
        seen.append(module.VALUE)

    after_import("hooked_probe", callback)
    assert importlib.util.find_spec("hooked_probe") is not None
    assert seen == []
    module = importlib.import_module("hooked_probe")
    assert seen == [41] and module.VALUE == 41
    assert not any(isinstance(f, _AfterImportFinder) for f in sys.meta_path)
    importlib.reload(module)
    assert seen == [41]


def test_two_hooks_on_one_module_both_fire(module_dir: Path) -> None:
    (module_dir / "hooked_pair.py").write_text("VALUE = 7\n")
    seen: list[str] = []
    after_import("hooked_pair", lambda m: seen.append("first"))
    after_import("hooked_pair", lambda m: seen.append("second"))
    importlib.import_module("hooked_pair")
    assert sorted(seen) == ["first", "second"]
