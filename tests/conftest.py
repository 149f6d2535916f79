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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.release_pool import ReleasePool
from tests.toolkit.cli_helpers import user_commit
from tests.vllm_in_process import import_vllm
from vllm_patchkit.errors import InputError
from vllm_patchkit.git.series import Series, load_series
from vllm_patchkit.judge.regression import report_cache
from vllm_patchkit.trees.releases import clone_release

pytest_plugins = ("tests.interpreter_state", "tests.run_wide_fixtures")

_REPORTS = pytest.StashKey[str]()
_OWN_REPORTS = pytest.StashKey[bool]()


EXTENDED_TIERS = {
    "overlay_eras": "the overlay through vLLM's plugin loader on four release trees",
    "audit_sweep": "the audit's dynamic pass on more trees and seeded copies, "
    "its static verdicts on every release",
    "mutation": "every mutant of every fix against the whole regression "
    "suite, and the runner's accounting of a mutant it cannot judge",
    "slow": "200 hypothesis batches, the compile matrix, memcheck on "
    "upstream's kernel, the audit's reproductions, whole journeys "
    "through several commands (every command on 0.17.0, 0.28.0 and "
    "0.29.0, demo on the embedded release and on user checkouts, apply "
    "then test with its base, pr's dry run, a fork of 0.22.0, an old "
    "release's runtime, the README's commands, the nightly gate's run and "
    "its reports, the audit hook through apply, the audit's reach through "
    "a partly applied series, rebase then refresh, the release workflow's "
    "steps, the wheels installed in fresh venvs, the benchmarks' runs, "
    "gpu-check's dry run, CI's own scripts), "
    "test's verdict on each kind of tree it cannot or need not judge, the "
    "matrix's cells, the overlay on 0.27.0 and 0.29.0 and StaticSink's "
    "vendor builds, and more releases or cases of checks the default run "
    "makes on one (the releases inside a patch's range, each signal, each "
    "child's timeout, each fix's unrecognised and strict cases, each "
    "option injected by the same way)",
    "gpu_image": "tools/gpu-check under the GPU image's torch and Triton, "
    "in a venv of their own that is built by hand",
}
"""Tiers the default run leaves out to stay within its time budget (each
test costs 10 s to a minute of CPU, mostly vLLM imported in a fresh
process or a release tree checked out; the default run keeps a smaller
check of the same kind: 20 hypothesis batches, the default compile
variants, the audit on 0.28.0 and 0.29.0, the overlay on 0.28.0 and
0.32.0 and one vendor build, the matrix's cache and exit rules, the demo's
refusals, ``test`` on a stock checkout and the suite on the patched one,
each command on its own, apply on 0.12.0 and 0.28.0, the code readings on
0.28.0, the releases at the edges of each patch's range, and the verdict
rules on the suite's own runs). They run
with ``--all-tiers`` (CI's run: ``tools/run-tests --all-tiers``) or when
``-m`` names them; otherwise each of their tests is reported skipped, with
that command, never left out silently."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--all-tiers",
        action="store_true",
        help="also run the extended tiers: " + ", ".join(sorted(EXTENDED_TIERS)),
    )
    parser.addoption(
        "--reports-dir",
        type=Path,
        metavar="DIR",
        help="share suite reports with other pytest runs of the same code "
        "through DIR, kept after the run (.ci/run's passes, each file alone; "
        "give it as one token, --reports-dir=DIR); "
        "default: a fresh directory of this run's, removed at its end",
    )


def pytest_configure(config: pytest.Config) -> None:
    """A fresh report cache for this run, shared by its xdist workers.

    Every tree content the suite judges (regression suite, patch 0002's
    test) runs for real once per run; the tests that judge the same content
    again (0.28.0 patched in another clone, the same base) reuse that run,
    in the test process and in the CLI processes it starts alike. Nothing
    is kept from an earlier run: the directory is new and removed at the
    end, and any value set outside the run is replaced. ``--reports-dir``
    names a directory to share and keep instead (passes over the same code
    in one CI job).
    """
    if hasattr(config, "workerinput"):
        return  # an xdist worker: it inherits the controller's directory
    shared = config.getoption("--reports-dir")
    if shared is not None:
        shared.mkdir(parents=True, exist_ok=True)
        directory = str(shared.resolve())
    else:
        directory = tempfile.mkdtemp(prefix="vllm-patchkit-reports-")
        config.stash[_OWN_REPORTS] = True
    os.environ[report_cache.ENV] = directory
    config.stash[_REPORTS] = directory


def pytest_unconfigure(config: pytest.Config) -> None:
    directory = config.stash.get(_REPORTS, None)
    if directory is not None:
        os.environ.pop(report_cache.ENV, None)
        if config.stash.get(_OWN_REPORTS, False):
            shutil.rmtree(directory, ignore_errors=True)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    directory = terminalreporter.config.stash.get(_REPORTS, None)
    if directory is None:
        return
    ran, reused, by_view = report_cache.summary(Path(directory))
    scope = (
        "this run"
        if terminalreporter.config.stash.get(_OWN_REPORTS, False)
        else f"the runs sharing {directory}"
    )
    terminalreporter.write_line(
        f"suite reports: {ran} run for real, {reused} reused from {scope} "
        f"({by_view} for a tree with the same vllm package)"
    )


LONGEST_FIRST = (
    "tests/toolkit/test_rebase_refresh.py",
    "tests/audit/test_dynamic.py",
    "tests/vllm/test_victims_and_capture_loop.py",
    "tests/vllm/test_static_sink_scenarios.py",
    "tests/overlay/test_plugin.py",
    "tests/overlay/test_logging.py",
    "tests/toolkit/test_precommit.py",
    "tests/toolkit/test_checkout_safety.py",
    "tests/toolkit/test_tree_process.py",
    "tests/toolkit/test_cli_apply_check.py",
    "tests/toolkit/test_pr.py",
    "tests/toolkit/test_hostile_inputs.py",
    "tests/overlay/test_record.py",
    "tests/toolkit/test_matrix.py",
    "tests/unit/test_tree_readings.py",
    "tests/packaging/test_wheels.py",
    "tests/audit/test_static.py",
    "tests/toolkit/test_verify_tree.py",
    "tests/toolkit/test_faults.py",
    "tests/toolkit/test_apply_release_trees.py",
)
"""Scheduling only (what runs is unchanged): the files that took longest in
a measured default run (1,302 s of test time on 2026-12-05 at c9fec8e),
longest first, so that no worker is left alone with a long file at the
end. Other files follow in collection order. A file that reads another's
runs goes with it (``WITH_THE_FILE_THAT_MAKES_ITS_RUNS``)."""

SPLIT_ACROSS_WORKERS = frozenset(
    {
        "tests/toolkit/test_verify_tree.py",
        "tests/toolkit/test_consistency.py",
        "tests/toolkit/test_matrix.py",
        "tests/kernels/test_differential.py",
        "tests/toolkit/test_checkout_safety.py",
        "tests/overlay/test_plugin_releases.py",
        "tests/kernels/test_compile.py",
        "tests/toolkit/test_pr.py",
        "tests/toolkit/test_demo_checkout.py",
        "tests/toolkit/test_demo.py",
    }
)
"""Long files whose tests share no module-scoped fixture: under ``--dist
loadfile`` their tests go one by one to whichever worker is free, instead
of all to one (test_verify_tree.py alone was 40% of a worker's time)."""

WITH_THE_FILE_THAT_MAKES_ITS_RUNS = {
    "tests/audit/test_cli.py": "tests/audit/test_dynamic.py",
    "tests/vllm/test_aiter_unified_capture.py": (
        "tests/vllm/test_victims_and_capture_loop.py"
    ),
    "tests/vllm/test_verdict_rules.py": "tests/vllm/test_victims_and_capture_loop.py",
}
"""Files that read a run another file makes (the audit's dynamic runs
through the report cache; the scenario runs and the patched tree through
``tests.run_wide_fixtures``) go to that file's worker, after it: side by
side on two workers, one waited on the other's lock for the length of the
run (22 to 80 s, by the order)."""

_WIDE_SCOPES = {"module", "package", "class"}


def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Longest first (see ``LONGEST_FIRST``); a stable sort, so each file
    keeps its own order. In a random-order run (pytest-randomly, on unless
    ``-p no:randomly``), which shuffles before this hook, the long files
    still come first, but in the shuffled order among themselves, as every
    other file and every test within a file. A split file must not share a
    wider fixture: two workers would each build it."""
    _skip_extended_tiers(config, items)
    if _random_order(config):
        rank = dict.fromkeys(LONGEST_FIRST, 0)
    else:
        rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(_file_of(item), len(rank)))
    for item in items:
        if _file_of(item) not in SPLIT_ACROSS_WORKERS:
            continue
        info = getattr(item, "_fixtureinfo", None)
        for defs in info.name2fixturedefs.values() if info else ():
            if any(d.scope in _WIDE_SCOPES for d in defs):
                raise pytest.UsageError(
                    f"{item.nodeid} uses the {defs[-1].scope}-scoped fixture "
                    f"{defs[-1].argname!r}: take its file out of "
                    "SPLIT_ACROSS_WORKERS in tests/conftest.py"
                )


def _skip_extended_tiers(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--all-tiers"):
        return
    wanted = config.option.markexpr or ""
    for tier, what in EXTENDED_TIERS.items():
        if tier in wanted:
            continue
        skip = pytest.mark.skip(
            reason=f"extended tier {tier} ({what}): run with "
            f"`tools/run-tests --all-tiers` or `-m {tier}`"
        )
        for item in items:
            if item.get_closest_marker(tier) is not None:
                item.add_marker(skip)


def _random_order(config: pytest.Config) -> bool:
    return config.pluginmanager.hasplugin("randomly") and bool(
        config.getoption("randomly_reorganize", False)
    )


def _file_of(item: pytest.Item) -> str:
    """The file's path from the project root (as listed above); a file
    outside it (a test's generated file) keeps its absolute path."""
    if item.path.is_relative_to(item.config.rootpath):
        return item.path.relative_to(item.config.rootpath).as_posix()
    return item.path.as_posix()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (tools/run-tests), but the files in
    ``SPLIT_ACROSS_WORKERS`` go test by test and those in
    ``WITH_THE_FILE_THAT_MAKES_ITS_RUNS`` with that file. (xdist's own ``loadgroup``
    cannot be used: its marks no longer reach the node ids under pytest 9.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SplitLongFiles(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            if file in SPLIT_ACROSS_WORKERS:
                return nodeid
            return WITH_THE_FILE_THAT_MAKES_ITS_RUNS.get(file, file)

    return SplitLongFiles(config, log)


@pytest.fixture(scope="session")
def vllm_in_process() -> None:
    """vLLM imported into this process the one way
    (:mod:`tests.vllm_in_process`): a test that calls vLLM in-process uses
    this fixture, so that the first import is never inside a test."""
    import_vllm()


@pytest.fixture(scope="session")
def series() -> Series:
    return load_series()


@pytest.fixture(scope="session")
def release_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReleasePool]:
    """This process's working clones of release trees, reused by
    ``release_clone`` from one test to the next (:mod:`tests.release_pool`)."""
    pool = ReleasePool(tmp_path_factory.mktemp("release-pool"))
    yield pool
    pool.close()


_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Iterator[None]:
    report = yield
    if report.failed:
        item.stash[_FAILED] = True
    return report


@pytest.fixture
def pooled_tree(
    release_pool: ReleasePool, request: pytest.FixtureRequest
) -> Iterator[Callable[[str, Path, Callable[[Path], None]], Path]]:
    """Factory: ``(key, dest, build)`` gives a git tree at ``dest`` as
    ``build`` makes one (given the path to build at), from ``release_pool``:
    built once per process and key, then put back as new after each test
    that took it, so a test pays for a reset, not for the build. A failed
    test's trees stay where they are, for a look."""
    taken = []

    def take(key: str, dest: Path, build: Callable[[Path], None]) -> Path:
        if dest.exists():
            raise InputError(f"{dest} exists and is not empty")
        taken.append((key, release_pool.take(key, dest, build), dest))
        return dest

    yield take
    if request.node.stash.get(_FAILED, False):
        return
    for key, pooled, dest in taken:
        release_pool.give_back(key, pooled, dest)


@pytest.fixture
def release_clone(
    tmp_path: Path, pooled_tree: Callable[[str, Path, Callable[[Path], None]], Path]
) -> Callable[..., Path]:
    """Factory: a fresh working clone of vLLM ``version`` as its users have
    it: a git checkout of the tag ``v<version>`` (vLLM's ``.gitignore`` keeps
    ``vllm/_version.py`` out), with a commit of the user's own on top.
    ``shape="release"``: the release tree as its sdist ships it
    (``_version.py`` committed), ``shape="tag"``: the checkout without the
    user's commit. From ``pooled_tree``: a clone made for an earlier test of
    this process, put back as new."""

    def make(version: str, shape: str = "checkout") -> Path:
        if shape not in ("checkout", "tag", "release"):
            raise ValueError(f"unknown tree shape {shape!r}")

        def build(at: Path) -> None:
            git = clone_release(version, at, checkout=shape != "release")
            if shape == "checkout":
                user_commit(git)

        return pooled_tree(f"{version}-{shape}", tmp_path / f"vllm-{version}", build)

    return make
