"""Shared fixtures: the real series, release trees, and scenario reports.

Expensive things (release trees, scenario subprocesses) are session-scoped
and cached on disk between runs (see ``vllm_patchkit.paths.cache_dir``).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from vllm_patchkit.apply import Status, apply_series
from vllm_patchkit.installed import copy_installed_vllm
from vllm_patchkit.regression.runner import TreeReport, run_scenarios
from vllm_patchkit.releases import clone_release
from vllm_patchkit.series import Series, load_series


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
