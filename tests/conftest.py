"""Shared fixtures: the real series, release trees, and scenario reports.

Expensive things (release trees, scenario subprocesses) are session-scoped
and cached on disk between runs (see ``vllm_patchkit.paths.cache_dir``).
Suite reports are shared within one run only: the run points the toolkit's
report cache at a directory of its own (see ``pytest_configure``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from vllm_patchkit.apply import Status, apply_series
from vllm_patchkit.installed import copy_installed_vllm
from vllm_patchkit.regression import report_cache
from vllm_patchkit.regression.runner import TreeReport, run_scenarios
from vllm_patchkit.releases import clone_release
from vllm_patchkit.series import Series, load_series

_REPORTS = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    """A fresh report cache for this run, shared by its xdist workers.

    Every tree content the suite judges (regression suite, patch 0002's
    test) runs for real once per run; the tests that judge the same content
    again (0.28.0 patched in another clone, the same base) reuse that run,
    in the test process and in the CLI processes it starts alike. Nothing
    is kept from an earlier run: the directory is new and removed at the
    end, and any value set outside the run is replaced.
    """
    if hasattr(config, "workerinput"):
        return  # an xdist worker: it inherits the controller's directory
    directory = tempfile.mkdtemp(prefix="vllm-patchkit-reports-")
    os.environ[report_cache.ENV] = directory
    config.stash[_REPORTS] = directory


def pytest_unconfigure(config: pytest.Config) -> None:
    directory = config.stash.get(_REPORTS, None)
    if directory is not None:
        os.environ.pop(report_cache.ENV, None)
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def series() -> Series:
    return load_series()


@pytest.fixture(scope="session")
def patched_installed_tree(
    tmp_path_factory: pytest.TempPathFactory, series: Series
) -> Path:
    """A git copy of the installed vLLM with the series applied by ``git am``."""
    tree = tmp_path_factory.mktemp("patched-installed") / "vllm-tree"
    copy_installed_vllm(tree)
    result = apply_series(tree, series)
    assert result.status is Status.APPLIED, result
    return tree


@pytest.fixture(scope="session")
def scenario_reports(patched_installed_tree: Path) -> dict[str, TreeReport]:
    """Scenario runs on stock installed vLLM and on the patched copy, in parallel."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        stock = pool.submit(run_scenarios, None)
        patched = pool.submit(run_scenarios, patched_installed_tree)
        reports = {"stock": stock.result(), "patched": patched.result()}
    for name, report in reports.items():
        assert report.report is not None, (
            f"{name} run produced no report:\n{report.log}"
        )
    return reports


@pytest.fixture
def release_clone(tmp_path: Path):
    """Factory: a fresh working clone of a cached release tree."""

    def make(version: str) -> Path:
        dest = tmp_path / f"vllm-{version}"
        clone_release(version, dest)
        return dest

    return make
