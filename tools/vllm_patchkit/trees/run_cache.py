"""The one cache of run results, keyed on (kind, tree content, code, environment).

A result the toolkit measured on a tree is served again only when nothing
that decides it changed: what kind of run it is (and its arguments), the
tree's content (a digest of its files, or a release commit id that names
one), the code that decides it (the toolkit's source, or a matrix step's
deciders and the series), and the environment it ran in. The regression
report cache (:mod:`~vllm_patchkit.judge.regression.report_cache`: per test
session) and the matrix's step cells (:class:`~vllm_patchkit.judge.matrix.StepCache`:
kept across runs) are both stored here; they differ only in what they put
in each part of the key.

One JSON file per key, written whole (a reader never sees half an entry);
two processes or threads that ask for one key at once run it once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold ``path`` (made if need be) against every other process and thread:
    each holder opens the file anew, and flock excludes other open files."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass(frozen=True)
class CacheKey:
    """Everything that decides a cached result."""

    kind: str
    """What was run, with its arguments (``scenarios ["--tree-reads"]``, ``stock``)."""
    tree: str
    """The tree's content: a digest of its files, or a release commit id."""
    code: str
    """A digest of the code that decides the result."""
    environment: Mapping[str, Any] = field(default_factory=dict)
    """The interpreter, the packages and the variables the run got."""

    def digest(self) -> str:
        parts = {
            "kind": self.kind,
            "tree": self.tree,
            "code": self.code,
            "environment": sorted(self.environment.items()),
        }
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


class RunCache:
    """Entries under ``root``; ``refresh`` ignores what is stored (and replaces it)."""

    def __init__(self, root: Path, *, refresh: bool = False) -> None:
        self.root = root
        self.refresh = refresh

    def path(self, key: CacheKey) -> Path:
        return self.root / f"{key.digest()}.json"

    def load(self, key: CacheKey) -> Any | None:
        """The stored value, or None (absent, unreadable, or refreshing)."""
        path = self.path(key)
        if self.refresh or not path.is_file():
            return None
        try:
            return json.loads(path.read_text())["value"]
        except (OSError, ValueError, KeyError):
            return None

    def store(self, key: CacheKey, value: Any) -> None:
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_suffix(f".{os.getpid()}-{threading.get_ident()}.tmp")
        scratch.write_text(json.dumps({"kind": key.kind, "value": value}))
        scratch.replace(path)

    def locked(self, key: CacheKey) -> AbstractContextManager[None]:
        """Hold ``key`` against every other process and thread."""
        return file_lock(self.path(key).with_suffix(".lock"))

    def get(
        self, key: CacheKey, compute: Callable[[], tuple[Any, bool]]
    ) -> tuple[Any, bool]:
        """``(value, served from the cache)``. ``compute`` returns the value and
        whether it may be kept (a run the environment spoiled may not)."""
        with self.locked(key):
            stored = self.load(key)
            if stored is not None:
                return stored, True
            value, keep = compute()
            if keep:
                self.store(key, value)
            return value, False
