"""Readings of vLLM code, kept across runs by the content they read.

The carry decision reads ``gpu_model_runner.py`` (thousands of lines) on
every ``check``, ``apply`` and ``doctor``; parsing it was most of what
``check`` itself spent. What a reader finds depends only on the file's
bytes and on the reader's code, so it is kept in the run cache under
``cache_dir()/code-readings``, keyed by the file's git blob id (computed
here, without a git process), a digest of the reader's source files and
the interpreter's version.

A fix's whole verdict on a tree is kept the same way where the tree's
content is known exactly (:func:`known_tree`: a clean checkout by its HEAD
tree id, a trial tree by that and the files it took), or where the reading
declares the files it reads (:func:`vllm_overlay.code.reads`), by their
blob ids (:func:`read_tree_cached`). Elsewhere it is read every time.

A stored reading is data, never code (JSON), and is checked against what
the reader writes before it is used: an entry that is corrupt, of another
shape, or planted is ignored, recomputed and replaced.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import vllm_overlay
from vllm_overlay.code import Code
from vllm_overlay.code import Shape as Verdict
from vllm_patchkit.paths import cache_dir
from vllm_patchkit.trees.run_cache import CacheKey, RunCache

Reading = list[dict[str, Any]]
"""What a reader finds: records of one shape (:class:`Shape`)."""

Shape = dict[str, type]
"""Each record's fields and their types; nothing more, nothing less."""

MAX_RECORDS = 64
"""More records than any reader writes: an entry with more is not one."""


def blob_id(data: bytes) -> str:
    """The git blob id (SHA-1 object format) of a file holding ``data``."""
    header = b"blob %d\0" % len(data)
    return hashlib.sha1(header + data, usedforsecurity=False).hexdigest()


def _code_digest(reader: tuple[Path, ...]) -> str:
    digest = hashlib.sha256()
    for source in reader:
        digest.update(source.read_bytes())
    return digest.hexdigest()


def _valid(stored: object, shape: Shape) -> bool:
    if not isinstance(stored, list) or len(stored) > MAX_RECORDS:
        return False
    return all(
        isinstance(record, dict)
        and record.keys() == shape.keys()
        and all(type(record[name]) is kind for name, kind in shape.items())
        for record in stored
    )


def read_cached(
    kind: str,
    data: bytes,
    reader: tuple[Path, ...],
    shape: Shape,
    read: Callable[[bytes], Reading],
) -> Reading:
    """``read(data)``, or what it returned before for the same bytes and the
    same ``reader`` source files. ``kind`` names the reading (one reader may
    make several)."""
    cache = RunCache(cache_dir() / "code-readings")
    # The interpreter too: ast.unparse writes what its version writes.
    python = {"python": sys.version}
    key = CacheKey(kind, blob_id(data), _code_digest(reader), python)
    stored = cache.load(key)
    if _valid(stored, shape):
        return stored  # type: ignore[no-any-return]
    found = read(data)
    assert _valid(found, shape), (kind, found)
    with contextlib.suppress(OSError):  # a read-only cache: kept nowhere
        cache.store(key, found)
    return found


_KNOWN: dict[Path, str] = {}
"""Trees whose content is known exactly, by path: their content id."""

ROOT = "\0root\0"
"""Stands for the tree's path in a stored reading's words."""


@contextlib.contextmanager
def known_tree(root: Path, content: str) -> Iterator[None]:
    """Within it, ``root`` holds exactly ``content`` (a git tree id, or a
    digest naming one and the files laid over it): its readings are kept.
    The caller vouches for it (a checkout ``git status`` found clean)."""
    before = _KNOWN.get(root)
    _KNOWN[root] = content
    try:
        yield
    finally:
        if before is None:
            del _KNOWN[root]
        else:
            _KNOWN[root] = before


def tree_content(root: Path) -> str | None:
    """The content id :func:`known_tree` gave ``root``, if it is known."""
    return _KNOWN.get(root)


@functools.cache
def _overlay_digest() -> str:
    """Every fix's reading is the overlay's code (its folder, the shared AST
    helpers, metadata_writes...): all of the package's sources."""
    package = Path(vllm_overlay.__file__).parent
    return _code_digest(tuple(sorted(package.rglob("*.py"))))


_FIELDS = ("shape", "file", "line", "detail")  # a stored Code's own fields


def _stored(code: Code, root: Path) -> dict[str, Any] | None:
    try:
        file = code.file.relative_to(root)
    except ValueError:
        return None  # a file outside the tree: its content is not known
    return {
        "shape": code.shape.value,
        "file": file.as_posix(),
        "line": code.line,
        "detail": code.detail.replace(str(root), ROOT),
    }


def _loaded(stored: object, root: Path) -> Code | None:
    if not isinstance(stored, dict) or stored.keys() != set(_FIELDS):
        return None
    shape, file, line, detail = (stored[k] for k in _FIELDS)
    if not (
        isinstance(shape, str)
        and shape in set(Verdict)
        and isinstance(file, str)
        and (line is None or type(line) is int)
        and isinstance(detail, str)
    ):
        return None
    relative = Path(file)
    if relative.is_absolute() or ".." in relative.parts:
        return None
    return Code(Verdict(shape), root / relative, line, detail.replace(ROOT, str(root)))


def _files_content(root: Path, files: tuple[Path, ...]) -> str | None:
    """A content id for ``files`` of ``root`` as a reading sees them: each
    one's blob id where it is a regular file (through links, as the reading
    reads it), else absent; None where one cannot be read."""
    digest = hashlib.sha256()
    for name in files:
        path = root / name
        try:
            held = blob_id(path.read_bytes()) if path.is_file() else "absent"
        except OSError:
            return None
        digest.update(f"\0{name.as_posix()}\0{held}".encode())
    return f"files:{digest.hexdigest()}"


def read_tree_cached(
    kind: str,
    root: Path,
    read: Callable[[], Code],
    files: tuple[Path, ...] | None = None,
) -> Code:
    """``read()`` (a fix's reading of the tree at ``root``), or what it found
    before with the same overlay code on the same content: the tree's, where
    it is known (:func:`known_tree`), else that of ``files``, where the
    reading declared them as all it reads. Only the :class:`Code`'s own
    fields are kept, the tree's path in them replaced by :data:`ROOT`."""
    content = _KNOWN.get(root)
    if content is None and files is not None:
        content = _files_content(root, files)
    if content is None:
        return read()
    cache = RunCache(cache_dir() / "code-readings")
    key = CacheKey(f"tree:{kind}", content, _overlay_digest(), {"python": sys.version})
    found = _loaded(cache.load(key), root)
    if found is not None:
        return found
    code = read()
    stored = _stored(code, root)
    if stored is not None:
        with contextlib.suppress(OSError):  # a read-only cache: kept nowhere
            cache.store(key, stored)
    return code
