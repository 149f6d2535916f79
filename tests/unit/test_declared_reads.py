"""A reading that declares its files (:func:`vllm_overlay.code.reads`) reads
no other file of the tree.

The toolkit keeps such a reading's verdict by the content of the files it
declared (:func:`vllm_patchkit.git.code_readings.read_tree_cached`): a file
it reads but did not declare would leave a stale verdict in place when that
file changes. Every open and directory listing under the tree is watched
(Python's audit events) while each declared reading runs, on release trees
stock and with the series applied.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from vllm_overlay.code import Code, declared_reads
from vllm_overlay.fixes import FIXES
from vllm_overlay.patch_rules import Records
from vllm_patchkit.git.invariants import INVARIANTS
from vllm_patchkit.paths import PATCHES_DIR
from vllm_patchkit.trees.releases import release_tree

_SEEN: list[tuple[Path, set[str]]] = []
"""While a watch runs: its tree and the paths under it opened or listed."""


def _audit(event: str, args: tuple[object, ...]) -> None:
    if not _SEEN or event not in ("open", "os.scandir", "os.listdir"):
        return
    if not args or not isinstance(args[0], str | Path):
        return
    root, seen = _SEEN[-1]
    path = Path(args[0])
    if path.is_relative_to(root):
        seen.add(path.relative_to(root).as_posix())


sys.addaudithook(_audit)


@contextlib.contextmanager
def _watching(root: Path) -> Iterator[set[str]]:
    seen: set[str] = set()
    _SEEN.append((root, seen))
    try:
        yield seen
    finally:
        _SEEN.pop()


def _uncached(
    kind: str,
    data: bytes,
    reader: object,
    shape: object,
    read: Callable[[bytes], Records],
) -> Records:
    return read(data)


def _declared(root: Path) -> Iterator[tuple[str, tuple[Path, ...], Callable[[], Code]]]:
    for name, rule in sorted(INVARIANTS.items()):
        for kind, read in (("carry", rule.carry), ("holds", rule.holds)):
            files = declared_reads(read)
            if files is not None:
                yield f"{kind}:{name}", files, functools.partial(read, root, _uncached)
    for fix in FIXES:
        files = declared_reads(fix.read_tree)
        if fix.read_tree is not None and files is not None:
            yield f"fix:{fix.name}", files, functools.partial(fix.read_tree, root)


def _series_applied(version: str, into: Path) -> Path:
    shutil.copytree(release_tree(version), into, symlinks=True)
    patches = sorted(str(p) for p in PATCHES_DIR.glob("*.patch"))
    subprocess.run(["git", "apply", *patches], cwd=into, check=True)
    return into


@pytest.mark.parametrize(
    "version",
    [
        "0.28.0",
        pytest.param("0.11.0", marks=pytest.mark.slow),
        pytest.param("0.29.0", marks=pytest.mark.slow),
        pytest.param("0.34.0", marks=pytest.mark.slow),
    ],
)
def test_a_declared_reading_reads_only_its_files(version: str) -> None:
    root = release_tree(version).resolve()
    opened = 0
    for kind, files, read in _declared(root):
        with _watching(root) as seen:
            read()
        declared = {f.as_posix() for f in files}
        assert seen <= declared, f"{kind} read {sorted(seen - declared)} undeclared"
        opened += len(seen)
    assert opened > 0  # the watch sees the readings' files


def test_a_declared_reading_reads_only_its_files_once_patched(tmp_path: Path) -> None:
    root = _series_applied("0.28.0", tmp_path / "vllm").resolve()
    readings = list(_declared(root))
    assert len(readings) >= len(FIXES)
    for kind, files, read in readings:
        with _watching(root) as seen:
            read()
        declared = {f.as_posix() for f in files}
        assert seen <= declared, f"{kind} read {sorted(seen - declared)} undeclared"


def test_an_undeclared_read_is_seen(tmp_path: Path) -> None:
    """The watch itself: a reading that opens another file is caught."""
    (tmp_path / "a.py").write_text("a = 1\n")
    (tmp_path / "b.py").write_text("b = 1\n")
    with _watching(tmp_path) as seen:
        (tmp_path / "b.py").read_bytes()
        list(tmp_path.glob("*.py"))
    assert seen == {"b.py", "."}
