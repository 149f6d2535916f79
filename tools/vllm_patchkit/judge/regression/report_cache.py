"""Reuse a run's result for a tree whose whole content was already run.

Its entries live in the one cache (:mod:`vllm_patchkit.trees.run_cache`).

Off unless ``VLLM_PATCHKIT_REPORT_CACHE`` names a directory that is the
user's own and private (:mod:`~vllm_patchkit.trees.cache_trust`). The test
session sets it to a fresh directory of its own, so each distinct tree still
runs for real once per session and nothing is carried over from an earlier
session or an earlier version of the code. Many tests judge trees with the
same content (0.28.0 patched by the series, in a differently named clone):
those share one run.

An entry's key covers everything that decides the result: the kind of run
and its arguments, the tree's content (every file and directory but
``.git``), this package's source, the interpreter and every installed
distribution with its version, and the environment the run gets (the
tree's own path written as a placeholder). A hit is returned with the
stored tree's path replaced by the new one, as a run there would print it.
Only runs that completed are stored. The installed vLLM (a tree of None:
about 750 MB with its libraries) is keyed by the package a child would
import, its files' names, sizes and times (:func:`installed_fingerprint`).
A suite run that shows it read nothing of its tree outside the ``vllm``
package, its metadata and the top level is also stored under a key of just
those (:func:`package_view`), for trees that differ only in their tests.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from stat import S_ISLNK, S_ISREG
from typing import Any

from vllm_overlay.tree_files import NotRead, read_regular
from vllm_patchkit.judge.regression.tree_reads import covered_dirs
from vllm_patchkit.paths import PACKAGE_DIR
from vllm_patchkit.trees.cache_trust import trusted_dir
from vllm_patchkit.trees.run_cache import CacheKey, RunCache

ENV = "VLLM_PATCHKIT_REPORT_CACHE"
TREE_PLACEHOLDER = "<tree>"
LOG = "runs.log"
MAX_TREE_BYTES = 512 * 1024 * 1024
"""A vLLM source tree is about 120 MB; an installed release with its
libraries about 750 MB, and is run once per session anyway."""
# Set per test or per xdist worker; they say nothing about the run.
_IGNORED_ENV = ("PWD", "OLDPWD", "_", "SHLVL", ENV)
_IGNORED_ENV_PREFIXES = ("PYTEST_",)

Record = dict[str, Any]


def reuse(
    kind: str,
    tree: Path | None,
    params: list[str],
    env: dict[str, str],
    produce: Callable[[], tuple[Record, bool]],
    *,
    package_only: Callable[[Record], bool] | None = None,
) -> Record:
    """``produce()``'s record, or the stored one of a run on the same content.

    ``produce`` returns the record and whether it may be stored (a run that
    completed). Two processes asking for one key at once run it once: the
    second waits for the first. ``package_only`` says of a record whether
    its run read nothing of the tree outside :func:`package_view` (the
    child reports it, :mod:`~vllm_patchkit.judge.regression.tree_reads`); such a
    run is also stored under the view's key and serves every tree with the
    same view: a tree that differs only in its tests is not run again.
    """
    if not os.environ.get(ENV):
        return produce()[0]
    root = trusted_dir(Path(os.environ[ENV]), "report cache")
    if root is None:  # not the user's own: said, and every run is real
        return produce()[0]
    with_view = package_only is not None
    whole, view = (
        (installed_fingerprint(env), None)
        if tree is None
        else fingerprints(tree, with_view=with_view)
    )
    if whole is None:
        started = time.perf_counter()
        record = produce()[0]
        _note(root, "ran", kind, tree, time.perf_counter() - started)
        return record
    cache = RunCache(root)
    key = run_key(kind, tree, params, env, whole)
    keys = [key]
    if view is not None:
        keys.append(run_key(f"{kind} (package view)", tree, params, env, view))
    # Trees with one content have one view: the view's lock serialises
    # both, so that two workers never run what one of them could share.
    with cache.locked(keys[-1]):
        for entry, how in zip(keys, ("reused", "reused-view"), strict=False):
            stored = cache.load(entry)
            if stored is not None:
                _note(root, how, kind, tree)
                if tree is None:
                    return stored["record"]
                return _moved(stored["record"], stored["tree"], str(tree))
        started = time.perf_counter()
        record, keep = produce()
        _note(root, "ran", kind, tree, time.perf_counter() - started)
        if keep:
            shared = view is not None and package_only is not None
            for entry in keys if shared and package_only(record) else keys[:1]:
                where = None if tree is None else str(tree)
                cache.store(entry, {"tree": where, "record": record})
        return record


def summary(root: Path) -> tuple[int, int, int]:
    """``(ran, reused, of which by package view)``: how many runs were real
    and how many were served (a view hit is logged as ``reused-view``)."""
    log = root / LOG
    lines = log.read_text().splitlines() if log.is_file() else []
    what = [line.split(" ", 1)[0] for line in lines]
    by_view = what.count("reused-view")
    return what.count("ran"), what.count("reused") + by_view, by_view


def _note(
    root: Path, what: str, kind: str, tree: Path | None, seconds: float = 0.0
) -> None:
    """One line per run asked for: what came of it, its kind, the seconds a
    real run took, the tree, and the test that asked (when pytest runs it),
    so that a slow test session shows which trees it ran and for whom."""
    asked_by = os.environ.get("PYTEST_CURRENT_TEST", "-").split(" ", 1)[0]
    where = tree if tree is not None else "(installed vllm)"
    with (root / LOG).open("a") as log:
        log.write(f"{what} {kind}\t{seconds:.1f}\t{where}\t{asked_by}\n")


def entry_key(
    kind: str, tree: Path, params: list[str], env: dict[str, str]
) -> str | None:
    """The digest of a run's key, or None when the tree cannot be read."""
    content = tree_fingerprint(tree)
    return (
        None if content is None else run_key(kind, tree, params, env, content).digest()
    )


def run_key(
    kind: str,
    tree: Path | None,
    params: list[str],
    env: dict[str, str],
    content: str,
) -> CacheKey:
    """A run's key: its kind and arguments, the tree's ``content`` (the whole
    tree's digest, the narrower :func:`package_view`, or the installed
    vLLM's :func:`installed_fingerprint`), this package's source, and the
    interpreter, its distributions and the run's variables (the tree's own
    path written as a placeholder)."""
    here = str(tree) if tree is not None else None
    run_env = {
        name: value if here is None else value.replace(here, TREE_PLACEHOLDER)
        for name, value in env.items()
        if name not in _IGNORED_ENV and not name.startswith(_IGNORED_ENV_PREFIXES)
    }
    return CacheKey(
        kind=json.dumps([kind, params]),
        tree=content,
        code=toolkit_fingerprint(),
        environment={
            "python": [sys.executable, sys.version, *installed_distributions()],
            "env": sorted(run_env.items()),
        },
    )


def tree_fingerprint(tree: Path) -> str | None:
    """A digest of every file, link and directory under ``tree`` but ``.git``.

    Read from the files themselves, not from git: a checkout's index or
    commit can differ from what the run would import (edits, untracked or
    ignored files, skip-worktree entries, checkout filters). None for a
    tree over ``MAX_TREE_BYTES`` (an installed release with its compiled
    libraries): hashing it would cost more than it could save.
    """
    return fingerprints(tree, with_view=False)[0]


def package_view(tree: Path) -> str | None:
    """A digest of what an import of ``vllm`` from ``tree`` can see: the
    whole of ``vllm/`` and its metadata directory (``vllm.egg-info``), every
    top-level entry's name and kind, and each top-level file's content;
    not the tests, docs, benchmarks or other directories."""
    return fingerprints(tree, with_view=True)[1]


def fingerprints(tree: Path, *, with_view: bool) -> tuple[str | None, str | None]:
    """:func:`tree_fingerprint` and, ``with_view``, :func:`package_view`,
    from one walk that reads each file once. The view is None without
    ``with_view``, without a ``vllm`` package, or for a tree too large."""
    if not tree.is_dir():
        return None, None
    entries = list(_walk(tree))
    files = [path for path, kind in entries if kind == "file"]
    if sum(path.lstat().st_size for path in files) > MAX_TREE_BYTES:
        return None, None
    covered = covered_dirs(tree) if with_view else []
    whole, view = hashlib.sha256(), hashlib.sha256()
    for path, kind in entries:
        record = f"{kind} {path.relative_to(tree)}\0".encode()
        if kind == "link":
            record += os.readlink(path).encode()
        elif kind == "file":
            record += b"x" if os.access(path, os.X_OK) else b"-"
            try:
                data = read_regular(path, MAX_TREE_BYTES)
            except NotRead:  # swapped for a FIFO or grown meanwhile: no key
                return None, None
            record += hashlib.sha256(data).digest()
        whole.update(record)
        if path.parent == tree or any(d in path.parents for d in covered):
            view.update(record)
    has_package = with_view and (tree / "vllm").is_dir()
    return whole.hexdigest(), view.hexdigest() if has_package else None


def _walk(tree: Path) -> Iterator[tuple[Path, str]]:
    """Every entry but the top-level ``.git`` (a directory, or a worktree's
    file), sorted; links are not followed. A FIFO, device or socket is
    ``special``: named, never opened (a read would wait, or never end)."""
    for top, dirs, files in os.walk(tree):
        base = Path(top)
        at_top = base == tree
        dirs[:] = sorted(d for d in dirs if not (at_top and d == ".git"))
        for name in dirs:
            yield base / name, "link" if (base / name).is_symlink() else "dir"
        for name in sorted(files):
            if at_top and name == ".git":
                continue
            path = base / name
            mode = path.lstat().st_mode
            kind = "file" if S_ISREG(mode) else "special"
            yield path, "link" if S_ISLNK(mode) else kind


def installed_fingerprint(env: Mapping[str, str]) -> str | None:
    """A digest of the ``vllm`` package a child run with ``env`` and no tree
    imports: the first on its ``PYTHONPATH``, else this environment's.

    From each file's name, size and modification time, not its bytes (an
    installed release is about 750 MB): pip, and an edit, give what they
    change a new time. None when no ``vllm`` package is found.
    """
    from vllm_patchkit.trees.tree_runtime import venv_path

    search = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    spec = importlib.machinery.PathFinder.find_spec("vllm", search + venv_path())
    if spec is None or not spec.submodule_search_locations:
        return None
    package = Path(next(iter(spec.submodule_search_locations)))
    digest = hashlib.sha256(f"installed {package}\0".encode())
    for path, kind in _walk(package):
        if "__pycache__" in path.parts:
            continue  # an import from this venv may write bytecode there
        digest.update(f"{kind} {path.relative_to(package)}\0".encode())
        if kind == "file":
            stat = path.stat()
            digest.update(f"{stat.st_size} {stat.st_mtime_ns}\0".encode())
    return digest.hexdigest()


def toolkit_fingerprint() -> str:
    """A digest of this package's source: the code that runs and reports."""
    package = PACKAGE_DIR
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        if "__pycache__" in path.parts or not path.is_file():
            continue
        digest.update(f"{path.relative_to(package)}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@functools.cache
def installed_distributions() -> tuple[str, ...]:
    """``name==version`` of every distribution installed in this
    interpreter's site directories.

    Not every one on ``sys.path``: an import adds to it (setuptools puts its
    vendored packages there), and a key that depended on what this process
    had imported would differ between a test worker and the command it
    starts, for one run.
    """
    import site
    from importlib import metadata  # only when a cache is in use

    places = site.getsitepackages()
    if site.ENABLE_USER_SITE:
        places.append(site.getusersitepackages())
    found = metadata.distributions(path=places)
    return tuple(sorted({f"{d.metadata['Name']}=={d.version}" for d in found}))


def _moved(value: Any, old: str, new: str) -> Any:
    """``value`` with the path ``old`` written as ``new`` wherever it occurs."""
    if isinstance(value, str):
        if value == old:
            return new
        return value.replace(old + os.sep, new + os.sep)
    if isinstance(value, list):
        return [_moved(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _moved(v, old, new) for k, v in value.items()}
    return value
