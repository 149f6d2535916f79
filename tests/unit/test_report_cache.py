"""The per-run report cache: a hit only for the same content, run for real once."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_patchkit.judge.regression import report_cache
from vllm_patchkit.judge.tree_pytest import run_tree_tests
from vllm_patchkit.trees.tree_process import TreeLauncher

TEST_FILE = "tests/test_counted.py"


def make_tree(root: Path, counter: Path, answer: int = 2) -> Path:
    """A tiny importable ``vllm`` and a test that records each time it runs."""
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text(f"ANSWER = {answer}\n")
    (root / "tests").mkdir()
    (root / TEST_FILE).write_text(
        "import vllm\n\n\n"
        "def test_answer():\n"
        f"    with open({str(counter)!r}, 'a') as out:\n"
        "        out.write(vllm.__file__ + '\\n')\n"
        "    assert vllm.ANSWER == 2, vllm.__file__\n"
    )
    return root


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "reports"
    monkeypatch.setenv(report_cache.ENV, str(directory))
    return directory


def key(tree: Path, params: tuple[str, ...] = ()) -> str | None:
    return report_cache.entry_key("k", tree, list(params), TreeLauncher.of(tree).env())


def test_same_content_shares_a_key_any_change_does_not(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    one = make_tree(tmp_path / "one", counter)
    two = make_tree(tmp_path / "two", counter)
    assert key(one) == key(two) is not None
    assert key(one, ("--scenario", "a")) != key(one)

    changes = {
        "edited": lambda t: (t / "vllm" / "__init__.py").write_text("ANSWER = 3\n"),
        "untracked file": lambda t: (t / "vllm" / "extra.py").write_text(""),
        "empty directory": lambda t: (t / "vllm" / "namespace").mkdir(),
        "file outside vllm/": lambda t: (t / "setup.cfg").write_text("[x]\n"),
        "executable bit": lambda t: (t / TEST_FILE).chmod(0o755),
        "symlink": lambda t: (t / "link").symlink_to("vllm"),
    }
    seen = {key(one)}
    for name, change in changes.items():
        tree = make_tree(tmp_path / name.replace(" ", "-"), counter)
        change(tree)
        assert key(tree) not in seen, name
        seen.add(key(tree))
    # .git, a directory or a worktree's file, is not content a run imports.
    (two / ".git").mkdir()
    (two / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (one / ".git").write_text(f"gitdir: {tmp_path}/main/.git/worktrees/one\n")
    assert key(two) == key(one)
    (one / "vllm" / ".git").write_text("below the top it is content\n")
    assert key(one) != key(two)


def test_the_environment_and_the_toolkit_are_part_of_the_key(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "tree", tmp_path / "runs")
    env = TreeLauncher.of(tree).env()
    base = report_cache.entry_key("k", tree, [], env)
    assert report_cache.entry_key("k", tree, [], {**env, "TRITON_X": "1"}) != base
    other_path = {**env, "PYTHONPATH": os.pathsep.join([str(tree), "/elsewhere"])}
    assert report_cache.entry_key("k", tree, [], other_path) != base
    # What only names the test or the xdist worker is no part of it.
    named = {**env, "PYTEST_CURRENT_TEST": "x", "PYTEST_XDIST_WORKER": "gw1"}
    assert report_cache.entry_key("k", tree, [], named) == base
    assert report_cache.entry_key("other kind", tree, [], env) != base
    assert len(report_cache.toolkit_fingerprint()) == 64
    assert any(d.startswith("pytest==") for d in report_cache.installed_distributions())


def test_a_tree_runs_once_per_content_and_reads_as_its_own(
    tmp_path: Path, cache: Path
) -> None:
    counter = tmp_path / "runs"
    first = make_tree(tmp_path / "first", counter)
    second = make_tree(tmp_path / "second", counter)

    ran = run_tree_tests(first, [TEST_FILE])
    served = run_tree_tests(second, [TEST_FILE])

    assert ran is not None and served is not None
    assert ran.ok and (ran.passed, ran.failed) == (1, 0)
    assert counter.read_text().splitlines() == [str(first / "vllm" / "__init__.py")]
    assert (served.passed, served.failed, served.returncode) == (1, 0, 0)
    assert str(first) not in served.output
    assert served.output == ran.output.replace(str(first), str(second))

    # Another content runs for real, and fails for real.
    (second / "vllm" / "__init__.py").write_text("ANSWER = 3\n")
    failed = run_tree_tests(second, [TEST_FILE])
    assert failed is not None and failed.failed == 1
    assert counter.read_text().splitlines()[1:] == [
        str(second / "vllm" / "__init__.py")
    ]
    assert str(second) in failed.failures[0] or str(second) in failed.output


def test_off_without_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(report_cache.ENV, raising=False)
    counter = tmp_path / "runs"
    tree = make_tree(tmp_path / "tree", counter)
    for _ in range(2):
        assert run_tree_tests(tree, [TEST_FILE]) is not None
    assert len(counter.read_text().splitlines()) == 2


def test_the_installed_vllm_is_keyed_by_the_package_a_child_imports(
    tmp_path: Path, cache: Path
) -> None:
    """No tree: the ``vllm`` a child would import (the first on its
    ``PYTHONPATH``, else the venv's) is the content; a change to one of its
    files, or another package first on the path, runs again."""
    calls = []

    def produce() -> tuple[dict[str, int], bool]:
        calls.append(1)
        return {"n": len(calls)}, True

    def ask(env: dict[str, str]) -> int:
        return report_cache.reuse("k", None, [], env, produce)["n"]

    venv = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    assert [ask(venv), ask(venv)] == [1, 1]
    shadow = tmp_path / "shadow"
    (shadow / "vllm").mkdir(parents=True)
    module = shadow / "vllm" / "__init__.py"
    module.write_text("ANSWER = 2\n")
    shadowed = {**venv, "PYTHONPATH": str(shadow)}
    assert [ask(shadowed), ask(shadowed)] == [2, 2]
    module.write_text("ANSWER = 30\n")
    assert ask(shadowed) == 3
    (shadow / "vllm" / "__pycache__").mkdir()  # bytecode an import wrote
    (shadow / "vllm" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert [ask(shadowed), ask(venv)] == [3, 1]


def test_an_incomplete_run_is_not_kept(tmp_path: Path, cache: Path) -> None:
    tree = make_tree(tmp_path / "tree", tmp_path / "runs")
    env = TreeLauncher.of(tree).env()
    calls = []

    def produce() -> tuple[dict[str, str], bool]:
        calls.append(1)
        return {"log": f"{tree}/x killed"}, len(calls) > 1

    results = [report_cache.reuse("k", tree, [], env, produce) for _ in range(3)]
    assert len(calls) == 2 and results[1] == results[2]
    moved = shutil.copytree(tree, tmp_path / "moved")
    served = report_cache.reuse("k", moved, [], TreeLauncher.of(moved).env(), produce)
    assert served == {"log": f"{moved}/x killed"} and len(calls) == 2


def test_the_package_view_covers_vllm_its_metadata_and_the_top_level(
    tmp_path: Path,
) -> None:
    counter = tmp_path / "runs"
    one = make_tree(tmp_path / "one", counter)
    view = report_cache.package_view
    # Another test file: the same view (the whole-tree key differs).
    other_tests = make_tree(tmp_path / "tests-differ", counter)
    (other_tests / TEST_FILE).write_text("def test_other():\n    pass\n")
    assert view(other_tests) == view(one) is not None
    assert key(other_tests) != key(one)
    changes = {
        "package file": lambda t: (t / "vllm" / "x.py").write_text(""),
        "metadata": lambda t: (t / "vllm.egg-info").mkdir(),
        "top-level file": lambda t: (t / "setup.py").write_text(""),
        "top-level name": lambda t: (t / "docs").mkdir(),
    }
    seen = {view(one)}
    for name, change in changes.items():
        tree = make_tree(tmp_path / name.replace(" ", "-"), counter)
        change(tree)
        assert view(tree) not in seen, name
        seen.add(view(tree))
    edited = make_tree(tmp_path / "edited-metadata", counter)
    (edited / "vllm.egg-info").mkdir()
    (edited / "vllm.egg-info" / "PKG-INFO").write_text("Version: 9\n")
    assert view(edited) not in seen


def test_a_run_is_shared_by_package_view_only_when_it_read_nothing_else(
    tmp_path: Path, cache: Path
) -> None:
    counter = tmp_path / "runs"
    calls: list[Path] = []

    def run(tree: Path, read_outside: list[str]) -> dict[str, object]:
        def produce() -> tuple[dict[str, object], bool]:
            calls.append(tree)
            return {"tree": str(tree), "outside": read_outside}, True

        return report_cache.reuse(
            "k",
            tree,
            [],
            TreeLauncher.of(tree).env(),
            produce,
            package_only=lambda record: record["outside"] == [],
        )

    def tests_differ(name: str) -> Path:
        tree = make_tree(tmp_path / name, counter)
        (tree / TEST_FILE).write_text(f"# {name}\n")
        return tree

    first = make_tree(tmp_path / "first", counter)
    assert run(first, [])["tree"] == str(first)
    second = tests_differ("second")
    assert run(second, []) == {"tree": str(second), "outside": []}
    assert calls == [first]
    # A run that read a test file is kept for its own content only.
    reader = make_tree(tmp_path / "reader", counter)
    (reader / "vllm" / "__init__.py").write_text("ANSWER = 5\n")
    run(reader, [TEST_FILE])
    third = tests_differ("third")
    (third / "vllm" / "__init__.py").write_text("ANSWER = 5\n")
    run(third, [])
    assert calls == [first, reader, third]


def reads_outside(tree: Path, cwd: Path, *steps: str) -> list[list[str]]:
    """A real child with the audit hook installed before it imports the
    ``vllm`` at ``tree``: what it read outside the package view after each
    of ``steps`` (Python lines, ``tree`` bound to the tree's path)."""
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from vllm_patchkit.judge.regression.tree_reads import TreeReads\n"
        "reads = TreeReads()\n"
        "tree = sys.argv[1]\n"
        "import vllm\n"
        "package = Path(vllm.__file__).parent\n"
    )
    for step in steps:
        script += f"{step}\nprint(json.dumps(reads.outside(package)))\n"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tree), *sys.path]),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", script, str(tree)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_the_child_reports_what_it_read_outside_the_package(tmp_path: Path) -> None:
    """An import of the package and of its metadata are inside the view; a
    test module and a data file are not."""
    tree = make_tree(tmp_path / "tree", tmp_path / "runs")
    (tree / "vllm.egg-info").mkdir()
    (tree / "vllm.egg-info" / "PKG-INFO").write_text("Version: 1\n")
    (tree / "tests" / "__init__.py").write_text("")
    (tree / "data").mkdir()
    (tree / "data" / "table.txt").write_text("x\n")

    before, after = reads_outside(
        tree,
        tmp_path,
        "Path(tree, 'vllm.egg-info', 'PKG-INFO').read_text()",
        "import tests; Path(tree, 'data', 'table.txt').read_text()",
    )

    assert before == []
    assert "tests/__init__.py" in after and "data/table.txt" in after


def test_a_read_is_judged_where_its_file_really_is(tmp_path: Path) -> None:
    """Links resolved: a tree imported through a link is the tree; a link in
    the package to a data file outside it is a read outside the view; a link
    outside the tree to a file of the package is inside it."""
    tree = make_tree(tmp_path / "tree", tmp_path / "runs")
    (tree / "data").mkdir()
    (tree / "data" / "table.txt").write_text("x\n")
    (tree / "vllm" / "table.txt").symlink_to(tree / "data" / "table.txt")
    (tmp_path / "alias").symlink_to(tree)
    (tmp_path / "init.py").symlink_to(tree / "vllm" / "__init__.py")

    inside, through_package, through_alias = reads_outside(
        tmp_path / "alias",
        tmp_path,
        f"open({str(tmp_path / 'init.py')!r}).read()",
        "Path(tree, 'vllm', 'table.txt').read_text()",
        "list(Path(tree, 'tests').iterdir())",
    )

    assert inside == []
    assert through_package == ["data/table.txt"]
    assert through_alias == ["data/table.txt", "tests"]


def test_the_key_does_not_depend_on_what_the_process_imported() -> None:
    """A test worker that imported setuptools (it puts its vendored
    packages on ``sys.path``) and a command it starts, that did not, key
    one run alike: else the command runs what the worker already ran."""
    show = (
        "from vllm_patchkit.judge.regression import report_cache\n"
        "print(report_cache.installed_distributions())\n"
    )
    seen = [
        subprocess.run(
            [sys.executable, "-c", first + show],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for first in ("", "import setuptools\n")
    ]
    assert "pytest==" in seen[0] and seen[0] == seen[1]
