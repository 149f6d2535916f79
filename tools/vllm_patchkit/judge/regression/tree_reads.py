"""What a run read of its vLLM tree outside the ``vllm`` package.

The report cache shares a suite run between trees whose ``vllm/`` package
and top level are the same (:func:`report_cache.package_view`), so that a
tree that differs only in its tests is not run again, but only when the
run read nothing else of the tree. The child records, with an audit hook
installed before it imports vLLM, every file it opened and every directory
it listed; :meth:`TreeReads.outside` gives those under the tree but outside
what the view covers. A bare ``stat`` is not an audit event: a run that
decides on another file's mere existence is not seen (vLLM's CPU path does
not).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from vllm_patchkit.paths import below

_EVENTS = ("open", "os.listdir", "os.scandir")
METADATA_SUFFIXES = (".egg-info", ".dist-info")
"""Top-level directories the view covers whole besides the package: the
package's metadata (``importlib.metadata`` reads ``vllm.egg-info``)."""


def covered_dirs(tree: Path, package: str = "vllm") -> list[Path]:
    """The directories of ``tree`` whose whole content the view covers."""
    found = [tree / package]
    found += [
        entry
        for entry in tree.iterdir()
        if entry.name.endswith(METADATA_SUFFIXES) and entry.is_dir()
    ]
    return sorted(found)


class TreeReads:
    """Every path this process opened or listed, from now on."""

    def __init__(self) -> None:
        self._paths: set[str] = set()
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple[object, ...]) -> None:
        if event not in _EVENTS or not args:
            return
        path = args[0]
        if isinstance(path, str | bytes | os.PathLike):
            self._paths.add(os.path.abspath(os.fsdecode(path)))

    def outside(self, package_dir: Path) -> list[str]:
        """The paths read under ``package_dir``'s parent (the tree) that the
        package view does not cover: anything but the package, its metadata
        directory, the tree's own listing and its top-level files; relative,
        sorted. Each path is judged where it really is (symlinks resolved);
        a run reads thousands, mostly outside the tree, so each directory is
        resolved once and paths are compared as strings."""
        package = package_dir.resolve()
        tree = str(package.parent)
        covered = [str(d) for d in covered_dirs(package.parent, package.name)]
        real_dirs: dict[str, str] = {}
        found = set()
        for raw in list(self._paths):
            path = _realpath(raw, real_dirs)
            if not below(path, tree):
                continue
            if any(path == d or below(path, d) for d in covered):
                continue
            relative = os.path.relpath(path, tree)
            if os.sep not in relative and not os.path.isdir(path):
                continue  # a top-level file: its content (or absence) is covered
            found.add(Path(relative).as_posix())
        return sorted(found)


def _realpath(raw: str, real_dirs: dict[str, str]) -> str:
    """``os.path.realpath(raw)`` for an absolute, normalised ``raw``, with
    its directory's resolution kept in ``real_dirs``: only a last component
    that is itself a link is resolved again."""
    head, tail = os.path.split(raw)
    real_head = real_dirs.get(head)
    if real_head is None:
        real_head = real_dirs[head] = os.path.realpath(head)
    if not tail:
        return real_head
    joined = os.path.join(real_head, tail)
    return os.path.realpath(joined) if os.path.islink(joined) else joined
