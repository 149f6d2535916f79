"""Run test files that live inside a vLLM tree, against that tree.

The series carries an upstream-style test (patch 0002) meant for vLLM's own
``tests/``. It is run the way vLLM's CI would, with two differences that let
it run offline on CPU: vLLM's ``tests/conftest.py`` is not loaded
(``--noconftest``: it imports model and hub helpers a source tree here cannot
satisfy), and vLLM is imported from the tree through ``PYTHONPATH``.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vllm_patchkit import progress
from vllm_patchkit.git.series import Series
from vllm_patchkit.judge.regression import report_cache
from vllm_patchkit.trees.tree_process import TreeLauncher
from vllm_patchkit.trees.tree_runtime import TreeRuntime

PYTEST_OPTIONS = ("-p", "no:cacheprovider", "--noconftest", "-q", "-rfE")


@dataclass
class PytestRun:
    files: list[str]
    command: list[str]
    returncode: int
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    failures: list[str] = field(default_factory=list)
    """``test id: first line of the failure message`` for each failure."""
    output: str = ""
    cases: dict[str, int] = field(default_factory=dict)
    """How many cases each file reported (any outcome): a file with none did
    not run, even when the other files passed."""
    device_skips: list[str] = field(default_factory=list)
    """``test id: reason`` of each case skipped because it needs a GPU: the
    launcher hides every device (CPU only), so such a case cannot run here.
    Counted apart: it is neither a failure nor a pass, and the file still
    needs a case that passed."""
    absent_modules: list[str] = field(default_factory=list)
    """vLLM modules the files import that the tree does not have: the test
    targets another release's layout (0002 needs ``vllm.v1.attention.backend``,
    0.14.0 on). Filled only when no case ran."""

    @property
    def inapplicable_reason(self) -> str | None:
        """Why the files cannot run on this tree at all, or None.

        Still a test that did not run (never a pass): the caller decides
        whether the tree can be judged without it.
        """
        if self.ran or not self.absent_modules:
            return None
        return (
            f"it imports {', '.join(self.absent_modules)}, which this tree's "
            "module layout does not have"
        )

    @property
    def ok(self) -> bool:
        """Every collected case ran and passed (none errored or skipped)."""
        return (
            self.returncode == 0
            and self.passed > 0
            and not (self.failed or self.errors or self.other_skips)
            and not self.empty_files
        )

    @property
    def other_skips(self) -> int:
        """Skipped cases that did not skip for want of a GPU."""
        return self.skipped - len(self.device_skips)

    @property
    def empty_files(self) -> list[str]:
        """The files no case was reported from."""
        return [name for name in self.files if not self.cases.get(name)]

    @property
    def ran(self) -> bool:
        """False when no case got to run: the file does not import on this
        tree (0002 needs vLLM 0.14.0's module layout) or every setup failed."""
        return self.passed + self.failed > 0

    @property
    def not_run_reason(self) -> str | None:
        """Why this run cannot count as a pass although nothing failed.

        None when it passed cleanly or a case failed (a failure is an
        answer). Otherwise a case errored (collection, import, fixture
        setup), was skipped, or nothing was collected: the test did not run
        as a whole, and a test that did not run is never a pass.
        """
        if self.ok or self.failed:
            return None
        if self.errors:
            first = self.failures[0] if self.failures else "no message"
            return f"{self.errors} error(s), first: {first}"
        if self.other_skips:
            return f"{self.other_skips} case(s) skipped"
        if self.passed == 0:
            return f"no case was collected (pytest exit {self.returncode})"
        if self.empty_files:
            return f"no case was collected from {', '.join(self.empty_files)}"
        return f"pytest exited {self.returncode} with {self.summary}"

    @property
    def summary(self) -> str:
        parts = [f"{self.passed} passed", f"{self.failed} failed"]
        if self.errors:
            parts.append(f"{self.errors} errors")
        if self.other_skips:
            parts.append(f"{self.other_skips} skipped")
        if self.device_skips:
            parts.append(f"{len(self.device_skips)} skipped (they need a GPU)")
        return ", ".join(parts)


def series_test_files(series: Series) -> list[str]:
    """The test files the series adds or changes under ``tests/``."""
    files = []
    for patch in series.patches:
        for name in patch.files:
            path = Path(name)
            is_test = path.parts[:1] == ("tests",) and path.name.startswith("test_")
            if is_test and name not in files:
                files.append(name)
    return files


def run_tree_tests(
    tree: Path,
    files: list[str],
    timeout: float = 900,
    runtime: TreeRuntime | None = None,
) -> PytestRun | None:
    """Run ``files`` (relative to ``tree``) with ``tree``'s vLLM; None if absent.

    ``runtime``: the tree's, when its judge already has it (the suite's
    report carries it). With ``VLLM_PATCHKIT_REPORT_CACHE`` set (the test
    session does), a tree whose content was already run this session gets
    that run's result.
    """
    present = [f for f in files if (tree / f).is_file()]
    if not present:
        return None
    command = [sys.executable, "-m", "pytest", *PYTEST_OPTIONS, *present]
    launcher = TreeLauncher.of(tree, runtime)
    env = launcher.env()

    def produce() -> tuple[dict[str, Any], bool]:
        run, complete = _run(launcher, tree, present, command, timeout)
        return asdict(run), complete

    with progress.phase(f"upstream tests ({len(present)} file(s)) on {tree}"):
        record = report_cache.reuse("tree-pytest", tree, command, env, produce)
    run = PytestRun(**record)
    if not run.ran:
        run.absent_modules = absent_vllm_modules(tree, run.output)
    return run


_NEEDS_GPU = re.compile(r"\b(CUDA|GPU)\b")
"""A skip reason that names the device the launcher hides (vLLM's tests
write ``requires CUDA``, ``needs a GPU``, ...)."""

_NO_MODULE = re.compile(r"ModuleNotFoundError: No module named '(vllm(?:\.\w+)*)'")
"""An import that failed: the exception, not the same words elsewhere (on a
checkout without ``_version.py``, vLLM warns "Failed to read commit hash:"
followed by "No module named 'vllm._version'" and goes on as ``dev``)."""


def absent_vllm_modules(tree: Path, output: str) -> list[str]:
    """The ``vllm.*`` modules pytest could not import that ``tree`` lacks
    (neither ``a/b.py`` nor ``a/b/``), as opposed to ones that failed."""
    absent = []
    for name in dict.fromkeys(_NO_MODULE.findall(output)):
        path = tree.joinpath(*name.split("."))
        if not path.with_suffix(".py").is_file() and not path.is_dir():
            absent.append(name)
    return absent


def run_with(
    launcher: TreeLauncher,
    tree: Path,
    files: list[str],
    command: list[str],
    timeout: float,
) -> PytestRun:
    """``command`` (a pytest run of ``files``, however started) on ``tree``,
    its cases read from its JUnit report; no cache."""
    return _run(launcher, tree, files, command, timeout)[0]


def _run(
    launcher: TreeLauncher,
    tree: Path,
    present: list[str],
    command: list[str],
    timeout: float,
) -> tuple[PytestRun, bool]:
    """The run, and whether pytest got to write its report (it completed)."""
    with tempfile.TemporaryDirectory(prefix="vllm-patchkit-pytest-") as scratch:
        report = Path(scratch) / "junit.xml"
        done = launcher.run(
            [*command, f"--junitxml={report}"], cwd=tree, timeout_s=timeout
        )
        if done.returncode is None:  # raised, as before (a caller says what it means)
            raise subprocess.TimeoutExpired(command, timeout, done.stdout, done.stderr)
        run = PytestRun(present, command, done.returncode, output=done.log)
        complete = report.is_file()
        if complete:
            _read_junit(report, run)
    return run, complete


def _node_id(file: str, classes: str, case: str) -> str:
    """pytest's own id of a case (``tests/x.py::TestY::test_z[p]``), as a
    reader reruns it; JUnit gives the module dotted (``tests.x``) and any
    test class after it (``.TestY``)."""
    return "::".join([file, *filter(None, classes.split(".")), case])


def _read_junit(report: Path, run: PytestRun) -> None:
    modules = {name.removesuffix(".py").replace("/", "."): name for name in run.files}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        classname = case.get("classname", "")
        name = f"{classname}::{case.get('name', '')}"
        for module, file in modules.items():
            if classname == module or classname.startswith(module + "."):
                run.cases[file] = run.cases.get(file, 0) + 1
                name = _node_id(file, classname[len(module) :], case.get("name", ""))
        failure = case.find("failure")
        error = case.find("error")
        if failure is not None:
            run.failed += 1
            message = (failure.get("message") or "").splitlines()
            run.failures.append(f"{name}: {message[0] if message else 'failed'}")
        elif error is not None:
            run.errors += 1
            message = (error.get("message") or "").splitlines()
            run.failures.append(f"{name}: {message[0] if message else 'error'}")
        elif (skipped := case.find("skipped")) is not None:
            run.skipped += 1
            reason = skipped.get("message") or ""
            if _NEEDS_GPU.search(reason):
                run.device_skips.append(f"{name}: {reason}")
        else:
            run.passed += 1
