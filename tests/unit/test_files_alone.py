"""CI's files-alone pass: a slice a commit, and the slices cover every file once."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "ci" / "files_alone.py"


def run(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The script as CI runs it, on a pytest filter that selects no test, so
    each file's run is quick and collects nothing (pytest's exit 5)."""
    return subprocess.run(
        [sys.executable, str(SCRIPT), f"--reports-dir={tmp_path}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def listed(output: str, prefix: str) -> list[str]:
    (line,) = [line for line in output.splitlines() if line.startswith(prefix)]
    return line.removeprefix(prefix).split(", ")


def load_script(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The script as a module, for this test only (its ``test_files`` puts
    the project root on ``sys.path``)."""
    spec = importlib.util.spec_from_file_location("files_alone", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "files_alone", module)
    monkeypatch.setattr(sys, "path", list(sys.path))
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("n", [1, 8, 24])
def test_the_slices_cover_every_file_once(
    n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = load_script(monkeypatch)
    every = script.test_files()
    slices = [script.slice_files(every, k, n) for k in range(1, n + 1)]
    dealt = [file for files in slices for file in files]
    assert sorted(dealt) == sorted(every)
    assert max(map(len, slices)) - min(map(len, slices)) <= 1


@pytest.mark.slow
def test_a_slice_runs_its_files_and_names_the_rest(tmp_path: Path) -> None:
    every = sorted(
        p.relative_to(ROOT).as_posix() for p in ROOT.glob("tests/**/test_*.py")
    )
    n = 24  # few files a slice: each is a real pytest process
    seen: list[str] = []
    for k in (1, n):
        result = run(
            f"--slice={k}/{n}", "--co", "-k", "no_test_has_this_name", tmp_path=tmp_path
        )
        assert result.returncode == 0, result.stdout + result.stderr
        not_run = listed(result.stdout, "not run alone (other slices): ")
        assert set(not_run) < set(every)
        ran = sorted(set(every) - set(not_run))
        assert ran and len(ran) <= -(-len(every) // n)
        assert f"{len(ran)} passed, 0 failed, {len(not_run)} not run" in result.stdout
        seen += ran
    assert len(seen) == len(set(seen)), "a file in two slices"


@pytest.mark.parametrize("bad", ["0/8", "9/8", "x", "1/0"])
def test_a_slice_out_of_range_is_refused(bad: str, tmp_path: Path) -> None:
    result = run(f"--slice={bad}", tmp_path=tmp_path)
    assert result.returncode == 2 and "--slice" in result.stderr
