"""A tree's modules compiled once per content, for the toolkit's children.

A child that runs a tree's vLLM writes no bytecode into the tree
(``PYTHONDONTWRITEBYTECODE``: a user's checkout is not ours to write), so
each child compiled every module it imports again: about 760 modules and
1.9 s of a 15 s suite run on vLLM 0.28.0. Python's own ``.pyc`` checks
could not serve anyway: they trust a file's path and modification time,
and each test's clone and each user's worktree has new ones.

The launcher names a cache directory in ``VLLM_PATCHKIT_BYTECODE``; a child
calls :func:`install` before it imports vLLM. From then on, a source file
found under one of the child's ``PYTHONPATH`` entries is compiled once per
content: the key is the interpreter's bytecode magic, its optimisation
level and the source's SHA-256, so the code is the code ``compile`` would
make of that file anywhere; only its file name is set to where it was read
from this time. The interpreter's own modules and the venv's keep Python's
``.pyc`` files. A cache entry that cannot be read or written is compiled
again; the cache never fails an import.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import marshal
import os
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import CodeType

from vllm_patchkit.paths import below

ENV = "VLLM_PATCHKIT_BYTECODE"
"""The cache directory a child's compiled code is kept in (unset: none)."""


def entry_path(cache: Path, source: bytes) -> Path:
    """Where the code compiled from ``source`` is kept under ``cache``."""
    digest = hashlib.sha256()
    digest.update(importlib.util.MAGIC_NUMBER)
    digest.update(bytes([sys.flags.optimize]))
    digest.update(source)
    key = digest.hexdigest()
    return cache / key[:2] / f"{key[2:]}.code"


class ContentKeyedLoader(importlib.machinery.SourceFileLoader):
    """A source loader whose compiled code comes from :attr:`cache` by the
    source's content; everything else is the standard loader's."""

    cache: Path

    def get_code(self, fullname: str) -> CodeType:
        path = self.get_filename(fullname)
        source = self.get_data(path)
        entry = entry_path(self.cache, source)
        code = _read(entry)
        if code is not None:
            return _with_file_name(code, path)
        code = self.source_to_code(source, path)
        _write(entry, code)
        return code


def install(environ: Mapping[str, str] | None = None) -> bool:
    """Compile the sources under this process's ``PYTHONPATH`` entries
    through the cache ``VLLM_PATCHKIT_BYTECODE`` names; True if it did
    (the variable set and the path not empty)."""
    env = os.environ if environ is None else environ
    directory = env.get(ENV)
    roots = [
        os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p
    ]
    if not directory or not roots:
        return False
    loader = type(
        "ContentKeyedLoader", (ContentKeyedLoader,), {"cache": Path(directory)}
    )
    sys.path_hooks.insert(0, path_hook(roots, loader))
    # Finders made before the hook (the toolkit's own directories) are made
    # again through it on their next use.
    sys.path_importer_cache.clear()
    return True


def path_hook(
    roots: Sequence[str], loader: type[ContentKeyedLoader]
) -> Callable[[str], importlib.machinery.FileFinder]:
    """A ``sys.path_hooks`` entry: for a directory under ``roots`` but not
    under the interpreter's or the venv's prefix (whose modules have their
    ``.pyc`` files; this checkout's venv lies under its root), the standard
    finder's loaders with ``loader`` for source files; any other path goes
    on to the next hook."""
    details = [
        (
            importlib.machinery.ExtensionFileLoader,
            importlib.machinery.EXTENSION_SUFFIXES,
        ),
        (loader, importlib.machinery.SOURCE_SUFFIXES),
        (
            importlib.machinery.SourcelessFileLoader,
            importlib.machinery.BYTECODE_SUFFIXES,
        ),
    ]
    prefixes = {os.path.abspath(p) for p in (sys.prefix, sys.base_prefix)}

    def hook(path: str) -> importlib.machinery.FileFinder:
        where = os.path.abspath(path) if path else ""
        if not any(_within(where, root) for root in roots) or any(
            _within(where, prefix) for prefix in prefixes
        ):
            raise ImportError(f"not a content-keyed directory: {path!r}")
        return importlib.machinery.FileFinder(path, *details)

    return hook


def _within(path: str, directory: str) -> bool:
    return path == directory or below(path, directory)


def _read(entry: Path) -> CodeType | None:
    try:
        code = marshal.loads(entry.read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    return code if isinstance(code, CodeType) else None


def _write(entry: Path, code: CodeType) -> None:
    """Kept atomically (children of a run write side by side); a cache that
    cannot be written costs a compile next time, nothing else."""
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=entry.parent, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(marshal.dumps(code))
            os.replace(temporary, entry)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError:
        pass


def _with_file_name(code: CodeType, path: str) -> CodeType:
    """``code`` and every code object nested in it, as compiled at ``path``
    (tracebacks, ``inspect`` and ``linecache`` read ``co_filename``)."""
    if code.co_filename == path:
        return code
    consts = tuple(
        _with_file_name(const, path) if isinstance(const, CodeType) else const
        for const in code.co_consts
    )
    return code.replace(co_filename=path, co_consts=consts)
