"""A cache of verdicts is used only when it is the user's own (issue 50, item 2).

The run caches (the suite's report cache, the code readings, the matrix's
cells) hand back verdicts; an entry planted there would be a verdict no run
made. Each test stores a real entry while the directory is the user's own,
then gives the directory away or opens it to others, and asks again. The
bytecode cache's own cases run real child interpreters
(``tests/unit/test_bytecode.py``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vllm_patchkit.judge.regression import report_cache
from vllm_patchkit.paths import cache_dir
from vllm_patchkit.trees.cache_trust import distrust
from vllm_patchkit.trees.run_cache import CacheKey, RunCache

NOBODY = 65534
KEY = CacheKey("kind", "tree", "code", {"python": "3"})


def give_away(directory: Path, how: str) -> None:
    if how == "writable by others":
        directory.chmod(0o777)
    elif how == "writable by its group":
        directory.chmod(0o770)
    else:
        os.chown(directory, NOBODY, NOBODY)


HOW = ["writable by others", "writable by its group", "owned by nobody"]


def counting(values: list[str], value: str):  # type: ignore[no-untyped-def]
    def compute() -> tuple[str, bool]:
        values.append(value)
        return value, True

    return compute


@pytest.mark.parametrize("how", HOW)
def test_a_run_cache_others_can_write_serves_nothing(
    tmp_path: Path, how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "runs"
    runs: list[str] = []
    RunCache(directory).get(KEY, counting(runs, "stored"))
    give_away(directory, how)

    assert RunCache(directory).get(KEY, counting(runs, "run")) == ("run", False)
    assert RunCache(directory).get(KEY, counting(runs, "again")) == ("again", False)
    assert runs == ["stored", "run", "again"]
    assert capsys.readouterr().err.count("not using the run cache") == 1


def test_a_cache_under_a_root_others_can_write_serves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rule covers every directory from the cache up to the cache root:
    ``code-readings/`` is private, the root above it is not."""
    monkeypatch.setenv("VLLM_OVERLAY_CACHE", str(tmp_path / "root"))
    readings = cache_dir() / "code-readings"
    runs: list[str] = []
    RunCache(readings).get(KEY, counting(runs, "stored"))
    (tmp_path / "root").chmod(0o777)

    assert RunCache(readings).get(KEY, counting(runs, "run")) == ("run", False)
    assert "writable by others" in (distrust(readings) or "")


def test_above_the_root_only_a_sticky_directory_may_be_open(tmp_path: Path) -> None:
    """Above the cache, a directory others can write lets them swap the
    cache for their own, unless it is sticky (``/tmp``)."""
    for name, mode in (("open", 0o777), ("sticky", 0o1777)):
        (tmp_path / name / "cache").mkdir(parents=True, mode=0o700)
        (tmp_path / name).chmod(mode)

    assert "writable by others" in (distrust(tmp_path / "open" / "cache") or "")
    assert distrust(tmp_path / "sticky" / "cache") is None


@pytest.mark.parametrize("how", HOW)
def test_a_report_cache_others_can_write_reports_no_stored_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    tree = tmp_path / "tree"
    (tree / "vllm").mkdir(parents=True)
    (tree / "vllm" / "__init__.py").write_text("")
    reports = tmp_path / "reports"
    monkeypatch.setenv(report_cache.ENV, str(reports))
    runs: list[str] = []

    def produce() -> tuple[dict[str, str], bool]:
        runs.append("ran")
        return {"verdict": f"run {len(runs)}"}, True

    report_cache.reuse("k", tree, [], {}, produce)
    give_away(reports, how)

    assert report_cache.reuse("k", tree, [], {}, produce) == {"verdict": "run 2"}
    assert runs == ["ran", "ran"]


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory"])
def test_an_entry_that_is_not_a_regular_file_is_not_read(
    tmp_path: Path, kind: str
) -> None:
    cache = RunCache(tmp_path / "runs")
    runs: list[str] = []
    cache.get(KEY, counting(runs, "stored"))
    entry = cache.path(KEY)
    planted = tmp_path / "planted.json"
    planted.write_text(entry.read_text())
    entry.unlink()
    if kind == "fifo":
        os.mkfifo(entry)
    elif kind == "symlink":
        entry.symlink_to(planted)
    else:
        entry.mkdir()

    assert cache.load(KEY) is None


@pytest.mark.parametrize("how", ["owned by nobody", "writable by others"])
def test_an_entry_that_is_not_the_users_own_is_not_read(
    tmp_path: Path, how: str
) -> None:
    """In a private cache, an entry someone else owns or can write (slipped
    in through a subdirectory an old umask left open) is a miss."""
    cache = RunCache(tmp_path / "runs")
    runs: list[str] = []
    cache.get(KEY, counting(runs, "stored"))
    entry = cache.path(KEY)
    if how == "owned by nobody":
        os.chown(entry, NOBODY, NOBODY)
    else:
        entry.chmod(0o666)

    assert cache.get(KEY, counting(runs, "run")) == ("run", False)
