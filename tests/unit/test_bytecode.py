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
    os.utime(entry, (1, 1))
    seen = run_child(second, cache)
    moved = str(second / "pkg" / "mod.py")
    assert entry.stat().st_mtime == 1, "compiled again: the entry was rewritten"
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

    seen = run_child(tree, blocked / "cache")

    assert seen["installed"] is True and seen["answer"] == 1


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
    monkeypatch.delenv(bytecode.ENV, raising=False)
    assert TreeLauncher(tree).env()[bytecode.ENV] == str(cache_dir() / "bytecode")
    monkeypatch.setenv(bytecode.ENV, "")
    assert TreeLauncher(tree).env()[bytecode.ENV] == ""
