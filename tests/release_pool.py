"""Working clones of release trees, reused from test to test.

A clone of a release checkout writes some 6,600 files: a second or more of
CPU on a busy 2-core machine, for each of the many tests that want a fresh
user-shaped tree. The pool keeps, per pytest process, the trees its tests
are done with and hands them out again, put back as they were: ``.git``
(objects aside) restored from a copy taken when the tree was new, then
``git reset --hard`` and ``git clean``, which rewrite only what the test
changed. The next test gets the same tree as a fresh clone would give it
(same files, refs, config, hooks, remote), moved to the path it asked for.
A tree that cannot be put back (its objects changed, a reset failed, the
test failed and its tree is kept for a look) is never handed out again.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PRISTINE_GIT = "pristine-git"
"""Beside each pooled tree: its ``.git`` as it was new, objects left out."""


SMALL = 1 << 16
"""Object files up to this size (loose objects) are compared by content."""


def _objects_state(git_dir: Path) -> dict[str, int | str]:
    """Every file under ``objects`` by path: its content's hash if small,
    else its size. Git never rewrites an object file (it may touch one to
    keep it from being pruned), so any change means the tree was damaged."""
    objects = git_dir / "objects"
    state: dict[str, int | str] = {}
    for top, _, files in os.walk(objects):
        for name in files:
            path = Path(top) / name
            size = path.lstat().st_size
            key = str(path.relative_to(objects))
            if size <= SMALL and not path.is_symlink():
                state[key] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                state[key] = size
    return state


@dataclass
class _Pooled:
    home: Path
    """Where the tree waits between tests (``home / "tree"``)."""
    objects: dict[str, int | str]


class ReleasePool:
    """Trees by key (version and shape), built by ``make`` when none waits."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._free: dict[str, list[_Pooled]] = {}
        self._made = 0

    def take(self, key: str, dest: Path, make: Callable[[Path], None]) -> _Pooled:
        """A tree for ``key`` moved to ``dest``: a waiting one, or one
        ``make`` builds (given the path to build at)."""
        free = self._free.get(key)
        if free:
            pooled = free.pop()
        else:
            self._made += 1
            home = self._root / str(self._made)
            home.mkdir(parents=True)
            make(home / "tree")
            git_dir = home / "tree" / ".git"
            shutil.copytree(
                git_dir,
                home / PRISTINE_GIT,
                symlinks=True,
                ignore=lambda d, _: ["objects"] if Path(d) == git_dir else [],
            )
            pooled = _Pooled(home, _objects_state(git_dir))
        dest.parent.mkdir(parents=True, exist_ok=True)
        (pooled.home / "tree").rename(dest)
        return pooled

    def give_back(self, key: str, pooled: _Pooled, tree: Path) -> None:
        """``tree`` (from ``take``) put back as new and moved home to wait;
        left where it is, never to be handed out again, if it cannot be."""
        if not _restore(tree, pooled):
            shutil.rmtree(pooled.home, ignore_errors=True)
            return
        tree.rename(pooled.home / "tree")
        self._free.setdefault(key, []).append(pooled)

    def close(self) -> None:
        shutil.rmtree(self._root, ignore_errors=True)


def _restore(tree: Path, pooled: _Pooled) -> bool:
    git_dir = tree / ".git"
    if tree.is_symlink() or git_dir.is_symlink() or not git_dir.is_dir():
        return False
    if os.path.ismount(git_dir):
        return False
    now = _objects_state(git_dir)
    if any(now.get(path) != state for path, state in pooled.objects.items()):
        return False
    try:
        for path in now.keys() - pooled.objects.keys():
            (git_dir / "objects" / path).unlink()  # what the test added
        _copy_git_dir(pooled.home / PRISTINE_GIT, git_dir, keep=("objects",))
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        for args in (("reset", "--quiet", "--hard"), ("clean", "-ffdxq")):
            subprocess.run(
                ["git", *args],
                cwd=tree,
                env=env,
                check=True,
                capture_output=True,
                timeout=120,
            )
        # The reset wrote ORIG_HEAD and a reflog entry: back as new, but for
        # the index, whose entries are the same and whose stat data is now.
        _copy_git_dir(pooled.home / PRISTINE_GIT, git_dir, keep=("objects", "index"))
    except (OSError, subprocess.SubprocessError):
        return False
    return True


def _copy_git_dir(pristine: Path, git_dir: Path, keep: tuple[str, ...]) -> None:
    """``git_dir`` made the ``pristine`` copy again, ``keep`` aside."""
    for entry in git_dir.iterdir():
        if entry.name in keep:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    for entry in pristine.iterdir():
        if entry.name in keep:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, git_dir / entry.name, symlinks=True)
        else:
            shutil.copy2(entry, git_dir / entry.name, follow_symlinks=False)
