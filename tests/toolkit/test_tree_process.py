"""Every way the toolkit runs a tree's code goes through the one launcher.

A tiny tree whose ``sitecustomize.py`` runs at the start of any Python
process that has the tree on its path: it records what the process sees
(devices, bytecode, its path, its process group), and on request starts a
grandchild and hangs. Each launcher user (the suite, the tree's pytest, the
audit's dynamic pass, the overlay probe, the mutation zygote and worker,
memcheck) is run for real on it: each child sees the one policy, and a
child run past its timeout takes its grandchild with it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from vllm_overlay.releases import parse_release
from vllm_patchkit.commands import memcheck as memcheck_command
from vllm_patchkit.judge.audit.dynamic import run_dynamic
from vllm_patchkit.judge.mutation.runner import BaselineFailed, run_mutation
from vllm_patchkit.judge.mutation.targets import TARGETS
from vllm_patchkit.judge.overlay_probe import probe_overlay
from vllm_patchkit.judge.regression import report_cache
from vllm_patchkit.judge.regression.runner import run_scenarios
from vllm_patchkit.judge.tree_pytest import run_tree_tests
from vllm_patchkit.judge.verify import run_tree
from vllm_patchkit.trees import tree_runtime
from vllm_patchkit.trees.tree_process import TreeLauncher, vllm_cache_root
from vllm_patchkit.trees.versions import RELEASE_ENV

MARK = "TREE_PROCESS_MARK"
HANG = "TREE_PROCESS_HANG"
TEST_FILE = "tests/test_tiny.py"

RECORD = f"""\
import json, os, sys
record = {{
    "pid": os.getpid(),
    "pgid": os.getpgid(0),
    "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
    "target": os.environ.get("VLLM_TARGET_DEVICE"),
    "release": os.environ.get("{RELEASE_ENV}"),
    "vllm_cache": os.environ.get("VLLM_CACHE_ROOT"),
    "no_bytecode": sys.flags.dont_write_bytecode,
    "path": sys.path,
    "argv": sys.argv,
}}
with open(os.environ["{MARK}"], "a") as out:
    out.write(json.dumps(record) + "\\n")
"""

SITECUSTOMIZE = f"""\
import os
if os.environ.get("{MARK}"):
{"".join("    " + line + chr(10) for line in RECORD.splitlines())}
if os.environ.get("{HANG}"):
    import subprocess, sys, time
    sleep = "import time; time.sleep(600)"
    sleeper = subprocess.Popen([sys.executable, "-S", "-c", sleep])
    with open(os.environ["{HANG}"], "a") as out:
        out.write(f"{{sleeper.pid}}\\n")
    time.sleep(600)
"""


def make_tree(root: Path) -> Path:
    """A tree the suite can import (it judges nothing), with a test of its own."""
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text("ANSWER = 2\n")
    # The files a mutation run with no mutant reads (its baseline's target).
    for relpath in (TARGETS[0].relpath, *TARGETS[0].partners):
        (root / relpath).parent.mkdir(parents=True, exist_ok=True)
        (root / relpath).write_text("VALUE = 1\n")
    (root / "tests").mkdir()
    (root / TEST_FILE).write_text(
        "import vllm\n\n\ndef test_answer():\n    assert vllm.ANSWER == 2\n"
    )
    (root / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return root.resolve()


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(report_cache.ENV, raising=False)  # each run for real
    for name in (
        "CUDA_VISIBLE_DEVICES",
        "VLLM_TARGET_DEVICE",
        "PYTHONDONTWRITEBYTECODE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "users-vllm-cache"))
    monkeypatch.setenv(MARK, str(tmp_path / "marks"))
    return make_tree(tmp_path / "tree")


def _mutation(tree: Path, fork: bool, timeout: float) -> None:
    with pytest.raises((BaselineFailed, subprocess.TimeoutExpired)):
        run_mutation(tree, mutants=(), fork=fork, timeout=timeout)


USERS: dict[str, Callable[[Path, float], Any]] = {
    "suite": lambda tree, t: run_scenarios(tree, timeout=t),
    "tree pytest": lambda tree, t: run_tree_tests(tree, [TEST_FILE], timeout=t),
    "audit": lambda tree, t: run_dynamic(tree, timeout=t),
    "overlay probe": lambda tree, t: probe_overlay(tree, timeout=t),
    "mutation zygote": lambda tree, t: _mutation(tree, True, t),
    "mutation worker": lambda tree, t: _mutation(tree, False, t),
}

USERS_IN_TIERS = [
    pytest.param(user, marks=pytest.mark.slow)
    if user in ("overlay probe", "mutation zygote", "mutation worker")
    else user
    for user in USERS
]
"""Each user of the one policy; the default run drives the suite's, the
tree pytest's and the audit's children, the extended tier the overlay
probe's and the mutation runner's (a vLLM import each)."""

TIMEOUT_USERS = [
    user if user == "suite" else pytest.param(user, marks=pytest.mark.slow)
    for user in USERS
]
"""Each user's child timed out: by default the suite's (every user kills
through one function); the extended tier times out each of the others."""


def marks(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "marks"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _alive(pid: int) -> bool:
    """Running, not a zombie (a killed orphan may wait for a reaper)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _still_alive(pids: list[int], within: float) -> list[int]:
    """The pids still running after ``within`` seconds: SIGKILL to a group
    is delivered at once, but each process dies when next scheduled, which
    on a loaded machine is not before the launcher returns."""
    deadline = time.monotonic() + within
    while (alive := [pid for pid in pids if _alive(pid)]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.05)
    return alive


@pytest.mark.parametrize("user", USERS_IN_TIERS)
def test_each_child_runs_under_the_one_policy(
    user: str, tree: Path, tmp_path: Path
) -> None:
    try:
        USERS[user](tree, 300)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{user}: timed out without hanging")
    seen = marks(tmp_path)
    assert seen, f"{user}: no child started with the tree on its path"
    for record in seen:
        assert record["cuda"] == "" and record["target"] == "cpu", (user, record)
        assert record["no_bytecode"] == 1, (user, record)
        assert record["release"] == "", (user, record)  # the tiny tree is none
        assert record["vllm_cache"] == str(vllm_cache_root(None)), (user, record)
        assert str(tree) in record["path"], (user, record)
        assert record["pgid"] != os.getpgid(0), f"{user}: in the parent's group"
    assert not list(tree.rglob("__pycache__")), f"{user}: bytecode in the tree"


@pytest.mark.parametrize("user", TIMEOUT_USERS)
def test_a_timed_out_child_takes_its_grandchildren_with_it(
    user: str, tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pids = tmp_path / "grandchildren"
    monkeypatch.setenv(HANG, str(pids))
    # The suite and the tree's pytest raise it; the others say it.
    with contextlib.suppress(subprocess.TimeoutExpired):
        USERS[user](tree, 5)
    started = [int(pid) for pid in pids.read_text().split()]
    assert started, f"{user}: no child hung"
    assert not _still_alive(started, within=10), f"{user}: left running"


def test_a_killed_toolkit_takes_its_tree_child_and_grandchild_with_it(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The toolkit (here a process running the tree's pytest through the
    launcher) is SIGKILLed while the child hangs: no code of the toolkit
    runs, yet the child and the process it started are gone within
    seconds (the kernel's parent-death signal, and the watchdog)."""
    pids = tmp_path / "grandchildren"
    monkeypatch.setenv(HANG, str(pids))
    code = (
        "from pathlib import Path\n"
        "from vllm_patchkit.judge.tree_pytest import run_tree_tests\n"
        f"run_tree_tests(Path({str(tree)!r}), [{TEST_FILE!r}], timeout=600)\n"
    )
    toolkit = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not (pids.exists() and pids.read_text().strip()):
            assert toolkit.poll() is None, "the toolkit stand-in exited"
            assert time.monotonic() < deadline, "no child hung"
            time.sleep(0.05)
    finally:
        toolkit.kill()
        toolkit.wait()
    started = [int(pid) for pid in pids.read_text().split()]
    children = [record["pid"] for record in marks(tmp_path)]
    left = _still_alive([*children, *started], within=10)
    for pid in left:  # the old code's orphans: do not leave them running
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not left, "the tree's code outlived the SIGKILLed toolkit"


def test_memcheck_runs_its_script_under_the_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No tree, the user's devices kept (none visible by default); the script
    stays in the caller's process group (the terminal's foreground: it may
    read the terminal, Ctrl-C reaches it) and this checkout is not put ahead
    of the user's modules."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "users-vllm-cache"))
    monkeypatch.setenv(MARK, str(tmp_path / "marks"))
    script = tmp_path / "script.py"
    script.write_text(RECORD + "sys.exit(7)\n")
    args = argparse.Namespace(script=["--", str(script)], json=False)
    assert memcheck_command.run(args) == 7
    (record,) = marks(tmp_path)
    assert record["cuda"] == "" and record["no_bytecode"] == 1
    assert record["vllm_cache"] == str(tmp_path / "users-vllm-cache")
    assert record["pgid"] == os.getpgid(0)
    assert str(Path(__file__).resolve().parents[2]) not in record["path"]


def test_a_judged_tree_gets_its_runtime_once(tree: Path) -> None:
    """The suite's runtime is handed to the tree's own test (it was made twice)."""
    before = tree_runtime.MADE[tree]
    run = run_tree(tree, "after", [TEST_FILE])
    assert run.upstream_test is not None and run.upstream_test.ran, run.problem
    assert tree_runtime.MADE[tree] - before == 1


def test_each_release_gets_a_vllm_cache_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM keeps one model-inspection entry per class in its cache; trees of
    two releases in one cache would evict each other's, and each miss costs
    a process that imports vLLM again. So each release's children get a
    cache of their own under the toolkit's, and the user's is not used."""
    monkeypatch.setenv("VLLM_OVERLAY_CACHE", str(tmp_path / "toolkit-cache"))
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "users-vllm-cache"))
    roots = {}
    for version in ("0.28.0", "0.29.0"):
        tree = tmp_path / version
        (tree / "vllm").mkdir(parents=True)
        (tree / "vllm" / "_version.py").write_text(f"__version__ = '{version}'\n")
        roots[version] = TreeLauncher(tree).env()["VLLM_CACHE_ROOT"]
    assert roots == {
        v: str(tmp_path / "toolkit-cache" / "vllm-cache" / v) for v in roots
    }
    # The installed vLLM (the pinned 0.28.0) shares its release's cache.
    assert TreeLauncher().env()["VLLM_CACHE_ROOT"] == roots["0.28.0"]
    assert vllm_cache_root(parse_release("0.28.0")) == Path(roots["0.28.0"])
