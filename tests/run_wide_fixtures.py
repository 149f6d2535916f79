"""The suite's expensive fixtures, built once per run, not per xdist worker.

Under ``-n 2`` (xdist) each worker builds its own session fixtures:
two test files that use ``scenario_reports`` would cost two patched trees
and four scenario subprocesses, about 90 s of the two cores. Here the first
worker that needs one builds it in the run's shared temporary directory
under a file lock; the other reads it. Without xdist, once per session.
(A plugin of ``tests/conftest.py``.)
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from vllm_patchkit.git.apply import Status, apply_series
from vllm_patchkit.git.series import Series
from vllm_patchkit.judge.regression.runner import TreeReport, run_scenarios
from vllm_patchkit.trees.installed import copy_installed_vllm


def _run_dir(factory: pytest.TempPathFactory) -> Path:
    """The temporary directory all xdist workers of this run share."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def once_per_run(
    factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]
) -> Path:
    """``make(directory)`` once per run; every caller gets the directory."""
    directory = _run_dir(factory) / f"shared-{name}"
    with _locked(directory.with_suffix(".lock")):
        done = directory / ".done"
        if not done.exists():
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir()
            make(directory)
            done.touch()
    return directory


@pytest.fixture(scope="session")
def patched_installed_tree(
    tmp_path_factory: pytest.TempPathFactory, series: Series
) -> Path:
    """A git copy of the installed vLLM with the series applied by ``git am``."""

    def make(directory: Path) -> None:
        tree = directory / "vllm-tree"
        copy_installed_vllm(tree)
        result = apply_series(tree, series)
        assert result.status is Status.APPLIED, result

    return once_per_run(tmp_path_factory, "patched-installed", make) / "vllm-tree"


@pytest.fixture(scope="session")
def scenario_reports(
    tmp_path_factory: pytest.TempPathFactory, patched_installed_tree: Path
) -> dict[str, TreeReport]:
    """Scenario runs on stock installed vLLM and on the patched copy, in parallel."""

    def make(directory: Path) -> None:
        with ThreadPoolExecutor(max_workers=2) as pool:
            stock = pool.submit(run_scenarios, None)
            patched = pool.submit(run_scenarios, patched_installed_tree)
            reports = {"stock": stock.result(), "patched": patched.result()}
        saved = {
            name: {
                "tree": str(r.tree) if r.tree else None,
                "returncode": r.returncode,
                "report": r.report,
                "log": r.log,
            }
            for name, r in reports.items()
        }
        (directory / "reports.json").write_text(json.dumps(saved))

    directory = once_per_run(tmp_path_factory, "scenario-reports", make)
    saved = json.loads((directory / "reports.json").read_text())
    reports = {
        name: TreeReport(
            Path(r["tree"]) if r["tree"] else None,
            r["returncode"],
            r["report"],
            r["log"],
        )
        for name, r in saved.items()
    }
    for name, report in reports.items():
        assert report.report is not None, (
            f"{name} run produced no report:\n{report.log}"
        )
    return reports
