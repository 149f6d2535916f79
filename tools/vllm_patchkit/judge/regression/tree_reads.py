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
        sorted."""
        package = package_dir.resolve()
        tree = package.parent
        covered = covered_dirs(tree, package.name)
        found = set()
        for raw in list(self._paths):
            path = Path(os.path.realpath(raw))
            if path == tree or any(d == path or d in path.parents for d in covered):
                continue
            if tree not in path.parents:
                continue
            if path.parent == tree and not path.is_dir():
                continue  # a top-level file: its content (or absence) is covered
            found.add(path.relative_to(tree).as_posix())
        return sorted(found)
