"""The tree children's bytecode cache, in real child interpreters.

Each child installs the cache the way a tree child does
(``vllm_patchkit.trees.bytecode.install`` under ``PYTHONDONTWRITEBYTECODE``)
and imports a small package from a tree on its ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from vllm_patchkit.errors import InputError
from vllm_patchkit.paths import cache_dir
from vllm_patchkit.trees import bytecode
from vllm_patchkit.trees.tree_process import TOOLKIT_PATHS, TreeLauncher

MODULE = """\
def outer():
    def inner():
        raise RuntimeError("from inner")
    return inner

ANSWER = {answer}
"""

CHILD = """\
import inspect, json, sys, traceback
from vllm_patchkit.trees import bytecode
installed = bytecode.install()
import json.decoder  # the interpreter's own: never through the cache
import pkg.mod
try:
    pkg.mod.outer()()
except RuntimeError as exc:
    raised_in = traceback.extract_tb(exc.__traceback__)[-1].filename
print(json.dumps({
    "installed": installed,
    "answer": pkg.mod.ANSWER,
    "file": pkg.mod.__file__,
    "outer": pkg.mod.outer.__code__.co_filename,
    "raised_in": raised_in,
    "source_file": inspect.getsourcefile(pkg.mod.outer()),
}))
"""


def make_tree(root: Path, answer: int = 1) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "mod.py").write_text(MODULE.format(answer=answer))
    return root


def run_child(tree: Path, cache: Path | None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != bytecode.ENV}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *TOOLKIT_PATHS])
    if cache is not None:
        env[bytecode.ENV] = str(cache)
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        cwd=tree.parent,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def entry_of(cache: Path, source: Path) -> Path:
    return bytecode.entry_path(cache, source.read_bytes())


def test_a_module_is_compiled_once_per_content_wherever_it_is_read(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    first = make_tree(tmp_path / "first")
    module = first / "pkg" / "mod.py"

    seen = run_child(first, cache)

    assert seen["installed"] is True
    entry = entry_of(cache, module)
    assert entry.is_file()
    # The same content at another path: the kept code, named as read there.
    second = tmp_path / "second"
    shutil.copytree(first, second)
    inode = entry.stat().st_ino
    seen = run_child(second, cache)
    moved = str(second / "pkg" / "mod.py")
    assert entry.stat().st_ino == inode, "compiled again: the entry was rewritten"
    assert seen["file"] == seen["outer"] == seen["raised_in"] == moved, seen
    assert seen["source_file"] == moved, seen
    assert not list(tmp_path.rglob("__pycache__")), "bytecode beside the sources"


def test_changed_source_is_compiled_again(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    tree = make_tree(tmp_path / "tree", answer=1)
    assert run_child(tree, cache)["answer"] == 1

    (tree / "pkg" / "mod.py").write_text(MODULE.format(answer=2))

    assert run_child(tree, cache)["answer"] == 2
    assert entry_of(cache, tree / "pkg" / "mod.py").is_file()


@pytest.mark.parametrize("damage", [b"", b"not marshal data", b"\xe9\x00\x00\x00"])
def test_a_damaged_entry_is_compiled_again_and_replaced(
    tmp_path: Path, damage: bytes
) -> None:
    cache = tmp_path / "cache"
    tree = make_tree(tmp_path / "tree")
    run_child(tree, cache)
    entry = entry_of(cache, tree / "pkg" / "mod.py")
    good = entry.read_bytes()
    entry.write_bytes(damage)

    assert run_child(tree, cache)["answer"] == 1
    assert entry.read_bytes() == good


def test_an_unwritable_cache_costs_a_compile_not_the_import(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache directory would be\n")
    tree = make_tree(tmp_path / "tree")

    seen, stderr = run_child_stderr(tree, blocked / "cache")

    assert seen["installed"] is False and seen["answer"] == 1
    assert "not using the bytecode cache" in stderr


def test_only_the_path_entries_go_through_the_cache(tmp_path: Path) -> None:
    """The tree's modules are kept; the interpreter's (``json.decoder``,
    imported after the cache) have their own ``.pyc`` files and are not."""
    cache = tmp_path / "cache"
    tree = make_tree(tmp_path / "tree")

    run_child(tree, cache)

    stdlib = Path(json.__file__).parent / "decoder.py"
    assert not entry_of(cache, stdlib).exists()
    kept = {p for p in cache.rglob("*.code")}
    assert entry_of(cache, tree / "pkg" / "mod.py") in kept
    assert entry_of(cache, tree / "pkg" / "__init__.py") in kept


def test_off_when_the_setting_is_empty(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    tree = make_tree(tmp_path / "tree")

    seen = run_child(tree, None)

    assert seen["installed"] is False and seen["answer"] == 1
    assert not cache.exists()


def test_the_launcher_names_the_cache_unless_the_user_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = make_tree(tmp_path / "tree")
    monkeypatch.setenv("VLLM_OVERLAY_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(bytecode.ENV, raising=False)
    assert TreeLauncher(tree).env()[bytecode.ENV] == str(cache_dir() / "bytecode")
    monkeypatch.setenv(bytecode.ENV, "")
    assert TreeLauncher(tree).env()[bytecode.ENV] == ""


# A cache anyone can fill is not used (issue 50, item 2).

NOBODY = 65534


def forged_entry(tmp_path: Path, stock: Path) -> bytes:
    """What an attacker plants under ``stock``'s key: the code the real
    writer compiled of another source (ANSWER = 2), with every record of
    that source's key in it rewritten to the stock source's key, so that
    nothing but where it lies tells it apart."""
    own = tmp_path / "attacker-cache"
    patched = make_tree(tmp_path / "patched", answer=2)
    run_child(patched, own)
    made = entry_of(own, patched / "pkg" / "mod.py")
    wanted = entry_of(own, stock)
    key, stock_key = made.parent.name + made.stem, wanted.parent.name + wanted.stem
    return made.read_bytes().replace(key.encode(), stock_key.encode())


def run_child_stderr(tree: Path, cache: Path, timeout: float = 60) -> tuple[Any, str]:
    env = {k: v for k, v in os.environ.items() if k != bytecode.ENV}
    env.update(PYTHONDONTWRITEBYTECODE="1", **{bytecode.ENV: str(cache)})
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *TOOLKIT_PATHS])
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        cwd=tree.parent,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout,
    )
    return json.loads(done.stdout), done.stderr


@pytest.mark.parametrize("how", ["writable by others", "owned by nobody"])
def test_an_entry_planted_in_a_cache_others_can_write_is_not_run(
    tmp_path: Path, how: str
) -> None:
    tree = make_tree(tmp_path / "stock", answer=1)
    stock = tree / "pkg" / "mod.py"
    cache = tmp_path / "cache"
    cache.mkdir()
    planted = entry_of(cache, stock)
    planted.parent.mkdir()
    forged = forged_entry(tmp_path, stock)
    planted.write_bytes(forged)
    if how == "writable by others":
        for directory in (cache, planted.parent):
            directory.chmod(0o777)
    else:
        for directory in (cache, planted.parent):
            os.chown(directory, NOBODY, NOBODY)

    seen, stderr = run_child_stderr(tree, cache)

    assert seen["answer"] == 1, "the planted code ran"
    assert seen["installed"] is False
    assert stderr.count("not using the bytecode cache") == 1, stderr
    assert planted.read_bytes() == forged, "the cache was changed"


def test_an_entry_recorded_for_another_source_is_not_run(tmp_path: Path) -> None:
    """In the user's own cache, an entry copied under another source's key
    (not rewritten) carries the key it was compiled for, and is not run."""
    tree = make_tree(tmp_path / "stock", answer=1)
    cache = tmp_path / "cache"
    patched = make_tree(tmp_path / "patched", answer=2)
    run_child(patched, cache)
    made = entry_of(cache, patched / "pkg" / "mod.py")
    planted = entry_of(cache, tree / "pkg" / "mod.py")
    planted.parent.mkdir(exist_ok=True)
    shutil.copyfile(made, planted)

    assert run_child(tree, cache)["answer"] == 1


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_an_entry_that_is_not_a_regular_file_is_not_read(
    tmp_path: Path, kind: str
) -> None:
    tree = make_tree(tmp_path / "tree")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    entry = entry_of(cache, tree / "pkg" / "mod.py")
    entry.parent.mkdir(mode=0o700)
    if kind == "fifo":
        os.mkfifo(entry)
    else:
        elsewhere = tmp_path / "elsewhere.code"
        elsewhere.write_bytes(forged_entry(tmp_path, tree / "pkg" / "mod.py"))
        entry.symlink_to(elsewhere)

    seen, _ = run_child_stderr(tree, cache, timeout=30)

    assert seen["answer"] == 1


def test_the_cache_is_trimmed_to_its_bound_oldest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launcher trims the cache before its children use it: over the
    bound (1 MiB here), the least recently used entries go first."""
    cache = tmp_path / "cache"
    entries = []
    for n in range(20):
        entry = cache / f"{n:02x}" / f"{n:062x}.code"
        entry.parent.mkdir(parents=True)
        entry.write_bytes(bytes(100 * 1024))
        os.utime(entry, (1000 + n, 1000 + n))
        entries.append(entry)
    cache.chmod(0o700)
    monkeypatch.setenv(bytecode.ENV, str(cache))
    monkeypatch.setenv("VLLM_PATCHKIT_BYTECODE_MAX_MB", "1")

    TreeLauncher(make_tree(tmp_path / "tree")).env()

    kept = [entry for entry in entries if entry.exists()]
    assert sum(e.stat().st_size for e in cache.rglob("*.code")) <= 1024 * 1024
    assert kept and kept == entries[-len(kept) :], "not the newest kept"


def test_a_hit_keeps_its_entry_from_trimming(tmp_path: Path) -> None:
    """A hit marks its entry used (its time), so trimming keeps what runs use."""
    tree = make_tree(tmp_path / "tree")
    cache = tmp_path / "cache"
    run_child(tree, cache)
    entry = entry_of(cache, tree / "pkg" / "mod.py")
    os.utime(entry, (1, 1))
    inode = entry.stat().st_ino

    run_child(tree, cache)

    assert entry.stat().st_ino == inode and entry.stat().st_mtime > 1


def test_the_launcher_hands_no_cache_others_can_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o777)
    monkeypatch.setenv(bytecode.ENV, str(cache))
    launcher = TreeLauncher(make_tree(tmp_path / "tree"))

    assert launcher.env()[bytecode.ENV] == ""
    assert launcher.env()[bytecode.ENV] == ""
    assert capsys.readouterr().err.count("not using the bytecode cache") == 1


def test_an_entry_someone_else_owns_is_not_run(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "stock", answer=1)
    stock = tree / "pkg" / "mod.py"
    cache = tmp_path / "cache"
    planted = entry_of(cache, stock)
    planted.parent.mkdir(parents=True)
    planted.write_bytes(forged_entry(tmp_path, stock))
    os.chown(planted, NOBODY, NOBODY)

    assert run_child(tree, cache)["answer"] == 1


@pytest.mark.parametrize("value", ["0", "-5", "1.5", "lots", "１"])
def test_a_bound_that_is_not_a_whole_number_of_mib_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(bytecode.ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(bytecode.MAX_MB_ENV, value)

    with pytest.raises(InputError, match=bytecode.MAX_MB_ENV):
        TreeLauncher(make_tree(tmp_path / "tree")).env()
