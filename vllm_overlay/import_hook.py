"""Run a callback right after one module is first imported.

The fix must reach vLLM's ``rocm_attn`` without importing it at plugin
registration (it pulls in Triton kernels and costs seconds); vLLM imports
it later, and only on ROCm. A meta-path finder wraps that module's loader
so the callback runs once the module body has executed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType

TYPE_CHECKING = False  # importlib.abc loads importlib.resources and tempfile
if TYPE_CHECKING:
    import importlib.abc
    import importlib.machinery


# Plain classes: the import system needs only these methods, and the ABCs'
# module would cost every vLLM start-up (and every report) a few ms.
class _CallbackLoader:
    def __init__(
        self, inner: importlib.abc.Loader, callback: Callable[[ModuleType], None]
    ) -> None:
        self._inner = inner
        self._callback = callback

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        self._callback(module)

    def __getattr__(self, name: str) -> object:
        # get_source, get_filename, is_package ...: tools such as inspect and
        # linecache still reach the real loader.
        return getattr(self._inner, name)


class _AfterImportFinder:
    def __init__(self, name: str, callback: Callable[[ModuleType], None]) -> None:
        self.name = name
        self.callback = callback
        self._resolving = False
        self._fired = False

    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname != self.name or self._resolving:
            return None
        # Stay on sys.meta_path until the module body has run: a bare
        # ``importlib.util.find_spec(name)`` (vLLM and its plugins probe
        # modules that way) resolves a spec without importing it, and the
        # import that follows must still come through here.
        self._resolving = True
        try:
            for finder in list(sys.meta_path):
                if finder is self:
                    continue
                find = getattr(finder, "find_spec", None)
                spec = find(fullname, path, target) if find else None
                if spec is not None and spec.loader is not None:
                    spec.loader = _CallbackLoader(spec.loader, self._fire)
                    return spec
        finally:
            self._resolving = False
        return None

    def _fire(self, module: ModuleType) -> None:
        """Once, after the module body ran: leave ``sys.meta_path``, call back."""
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        if self._fired:
            return
        self._fired = True
        self.callback(module)


def after_import(name: str, callback: Callable[[ModuleType], None]) -> None:
    """Call ``callback(module)`` once ``name`` is imported (now, if it is)."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    if any(
        isinstance(f, _AfterImportFinder) and f.name == name and f.callback == callback
        for f in sys.meta_path
    ):
        return
    sys.meta_path.insert(0, _AfterImportFinder(name, callback))
