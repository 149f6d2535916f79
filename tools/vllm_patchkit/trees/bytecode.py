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

What the cache holds is run, so it is used only in a directory
:mod:`~vllm_patchkit.trees.cache_trust` allows: that rule, not the key,
keeps out an entry planted under a stock file's key. Each entry also
records its key, so that one copied or renamed under another source's key
(by hand, a sync tool, a bad restore) is never run for it.

The cache is bounded (:data:`MAX_MB_ENV`, default :data:`DEFAULT_MAX_MB`
MiB): the launcher trims it, least recently used first, before its first
child of a process uses it (:func:`for_children`); a hit marks its entry
used.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import marshal
import os
import stat
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import CodeType

from vllm_patchkit.errors import InputError
from vllm_patchkit.paths import below, cache_dir, write_atomic
from vllm_patchkit.trees.cache_trust import read_entry, trusted_dir

ENV = "VLLM_PATCHKIT_BYTECODE"
"""The cache directory a child's compiled code is kept in (unset: none)."""

MAX_MB_ENV = "VLLM_PATCHKIT_BYTECODE_MAX_MB"
"""The cache's bound in MiB; unset: :data:`DEFAULT_MAX_MB`."""

DEFAULT_MAX_MB = 256
"""A suite run on one release's tree compiles about 760 modules (about 11 MB:
1,948 entries held 28 MB here); releases share most of their files."""

TRIMMED_TO = 0.75
"""An over-bound cache is trimmed to this share of the bound, so that the
next few runs do not each trim again."""

MAX_ENTRY_BYTES = 16 * 1024 * 1024
"""vLLM's largest module compiles to well under 1 MiB."""

WHAT = "bytecode cache"

_HEADER = b"vllm-patchkit code for "
"""An entry: this, the key (hexadecimal), a newline, the marshalled code."""

_TOUCH_AFTER_S = 3600
"""A hit older than this marks its entry used (one write an hour at most)."""


def _key(source: bytes) -> str:
    digest = hashlib.sha256()
    digest.update(importlib.util.MAGIC_NUMBER)
    digest.update(bytes([sys.flags.optimize]))
    digest.update(source)
    return digest.hexdigest()


def entry_path(cache: Path, source: bytes) -> Path:
    """Where the code compiled from ``source`` is kept under ``cache``."""
    return _entry_path(cache, _key(source))


def _entry_path(cache: Path, key: str) -> Path:
    return cache / key[:2] / f"{key[2:]}.code"


class ContentKeyedLoader(importlib.machinery.SourceFileLoader):
    """A source loader whose compiled code comes from :attr:`cache` by the
    source's content; everything else is the standard loader's."""

    cache: Path

    def get_code(self, fullname: str) -> CodeType:
        path = self.get_filename(fullname)
        source = self.get_data(path)
        key = _key(source)
        entry = _entry_path(self.cache, key)
        # The entry records its key: one copied under another key is not run.
        header = _HEADER + key.encode() + b"\n"
        code = _read(entry, header)
        if code is not None:
            return _with_file_name(code, path)
        code = self.source_to_code(source, path)
        _write(entry, header + marshal.dumps(code))
        return code


def install(environ: Mapping[str, str] | None = None) -> bool:
    """Compile the sources under this process's ``PYTHONPATH`` entries
    through the cache ``VLLM_PATCHKIT_BYTECODE`` names; True if it did
    (the variable set, the path not empty, the directory trusted: else
    said on stderr, and every module compiles as without the cache)."""
    env = os.environ if environ is None else environ
    directory = env.get(ENV)
    roots = [
        os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p
    ]
    if not directory or not roots:
        return False
    cache = trusted_dir(Path(directory), WHAT)
    if cache is None:
        return False
    loader = type("ContentKeyedLoader", (ContentKeyedLoader,), {"cache": cache})
    sys.path_hooks.insert(0, path_hook(roots, loader))
    # Finders made before the hook (the toolkit's own directories) are made
    # again through it on their next use.
    sys.path_importer_cache.clear()
    return True


def for_children(environ: Mapping[str, str]) -> str:
    """What a tree child gets in ``VLLM_PATCHKIT_BYTECODE``: the cache the
    user named, else the one under the cache directory; "" when it is off
    or not trusted (said once on stderr). Trimmed to its bound the first
    time a process hands it out."""
    directory = environ.get(ENV)
    if directory is None:
        directory = str(cache_dir() / "bytecode")
    if not directory:
        return ""
    bound = max_bytes(environ)
    cache = trusted_dir(Path(directory), WHAT)
    if cache is None:
        return ""
    if cache not in _trimmed:
        _trimmed.add(cache)
        trim(cache, bound)
    return str(cache)


_trimmed: set[Path] = set()


def max_bytes(environ: Mapping[str, str]) -> int:
    """The cache's bound in bytes (``VLLM_PATCHKIT_BYTECODE_MAX_MB``, a
    positive whole number of MiB); anything else is refused (exit 2)."""
    text = environ.get(MAX_MB_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_MB * 1024 * 1024
    if not (text.isascii() and text.isdigit() and int(text) > 0):
        raise InputError(
            f"{MAX_MB_ENV}={text!r}: give the bytecode cache's bound as a "
            "positive whole number of MiB"
        )
    return int(text) * 1024 * 1024


def trim(cache: Path, bound: int) -> None:
    """If the entries under ``cache`` hold more than ``bound`` bytes, delete
    the least recently used (oldest modification time) until they hold
    :data:`TRIMMED_TO` of it; scratch files of writes that were cut off an
    hour ago or more go too. A file that cannot be removed stays; the cache
    is never refused for its size."""
    entries: list[tuple[float, int, str]] = []
    stale = time.time() - _TOUCH_AFTER_S
    try:
        for shard in os.scandir(cache):
            if not shard.is_dir(follow_symlinks=False):
                continue
            for item in os.scandir(shard.path):
                info = item.stat(follow_symlinks=False)
                if not stat.S_ISREG(info.st_mode):
                    continue
                if item.name.endswith(".code"):
                    entries.append((info.st_mtime, info.st_size, item.path))
                elif item.name.endswith(".tmp") and info.st_mtime < stale:
                    _remove(item.path)
    except OSError:
        return
    total = sum(size for _, size, _ in entries)
    if total <= bound:
        return
    for _, size, path in sorted(entries):
        if total <= bound * TRIMMED_TO:
            break
        if _remove(path):
            total -= size


def _remove(path: str) -> bool:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return True  # another run trimmed it
    except OSError:
        return False
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


def _read(entry: Path, header: bytes) -> CodeType | None:
    """The code kept in ``entry`` if it starts with ``header``; a hit not
    marked used within the last hour is marked now (its modification time),
    for :func:`trim`."""
    found = read_entry(entry, MAX_ENTRY_BYTES)
    if found is None or not found[0].startswith(header):
        return None
    data, info = found
    try:
        code = marshal.loads(data[len(header) :])
    except (ValueError, EOFError, TypeError):
        return None
    if not isinstance(code, CodeType):
        return None
    if time.time() - info.st_mtime > _TOUCH_AFTER_S:
        # Read-only: trimming may take it early, nothing else.
        with contextlib.suppress(OSError):
            os.utime(entry, follow_symlinks=False)
    return code


def _write(entry: Path, data: bytes) -> None:
    """Kept atomically (children of a run write side by side); a cache that
    cannot be written costs a compile next time, nothing else."""
    try:
        entry.parent.mkdir(mode=0o700, exist_ok=True)
        write_atomic(entry, data)
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
