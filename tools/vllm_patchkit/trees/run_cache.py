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
two processes or threads that ask for one key at once run it once. A stored
verdict is only as good as the directory it lies in: a cache that is not
the user's own and private (:mod:`~vllm_patchkit.trees.cache_trust`) is
neither read, written nor locked, and every run is measured.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from vllm_patchkit.paths import write_atomic
from vllm_patchkit.trees.cache_trust import read_entry, trusted_dir

MAX_ENTRY_BYTES = 64 * 1024 * 1024
"""A suite run's record, with its log, is well under a megabyte."""


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

    @cached_property
    def usable(self) -> bool:
        """The directory may be used (judged once per instance, said once)."""
        return trusted_dir(self.root, "run cache") is not None

    def load(self, key: CacheKey) -> Any | None:
        """The stored value, or None (absent, unreadable, not a regular file,
        refreshing, or the cache not usable)."""
        if self.refresh or not self.usable:
            return None
        found = read_entry(self.path(key), MAX_ENTRY_BYTES)
        if found is None:
            return None
        try:
            return json.loads(found[0])["value"]
        except (ValueError, KeyError, TypeError):
            return None

    def store(self, key: CacheKey, value: Any) -> None:
        if not self.usable:
            return
        path = self.path(key)
        # Private (0600) whatever the umask: an entry others can write is
        # not read (cache_trust.read_entry).
        write_atomic(path, json.dumps({"kind": key.kind, "value": value}))

    def locked(self, key: CacheKey) -> AbstractContextManager[None]:
        """Hold ``key`` against every other process and thread (nothing to
        hold in a cache that is not used)."""
        if not self.usable:
            return nullcontext()
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
