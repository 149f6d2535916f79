"""Readings of one vLLM file, kept across runs by the file's git blob id.

The carry decision reads ``gpu_model_runner.py`` (thousands of lines) on
every ``check``, ``apply`` and ``doctor``; parsing it was most of what
``check`` itself spent. What a reader finds depends only on the file's
bytes and on the reader's code, so it is kept in the run cache
(:class:`~vllm_patchkit.trees.run_cache.RunCache`, under
``cache_dir()/code-readings``) keyed by the file's blob id, computed as git
does (``git hash-object``: the same id ``git ls-files -s`` shows, here
without a git process, and for a tree that is no checkout, or a checkout's
uncommitted file), by a digest of the reader's source files and by the
interpreter's version.

A stored reading is data, never code (JSON), and is checked against what
the reader writes before it is used: an entry that is corrupt, of another
shape, or planted is ignored, recomputed and replaced.
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    make several); ``shape`` is what each of its records holds."""
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
