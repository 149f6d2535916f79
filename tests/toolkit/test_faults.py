"""Bad input and hard failures: a clear message, a non-zero exit, nothing lost.

Interruptions are made real with git's own ``applypatch-msg`` hook, which
``git am`` runs for each patch: the hook marks that the apply is under way
(after the journal was written) and then waits, so the test interrupts or
kills the run at that point, waiting on that mark, never on a clock.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import (
    as_user,
    install_hook,
    journal_file,
    kill_everything,
    patchkit,
    patchkit_json,
    snapshot,
    start_patchkit,
    wait_for,
)
from vllm_patchkit.git.series import load_series
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.paths import PATCHES_DIR

pytestmark = pytest.mark.release_trees

PATCH_NAME = next(PATCHES_DIR.glob("0001-*.patch")).name
SERIES_LENGTH = len(load_series().patches)


@pytest.fixture
def tree(release_clone: Callable[[str], Path]) -> Path:
    return release_clone("0.28.0")


def refused(proc: subprocess.CompletedProcess[str], text: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert text in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_dirty_tree(tree: Path) -> None:
    (tree / "README.md").write_text("my edit\n")
    before = snapshot(tree)
    refused(patchkit("apply", str(tree)), "uncommitted changes")
    assert snapshot(tree) == before


def test_untracked_file_in_the_way(tree: Path) -> None:
    (tree / "vllm" / "v1" / "attention" / "backends" / "rocm_attn.py.orig").write_text(
        "x"
    )
    before = snapshot(tree)
    refused(patchkit("apply", str(tree)), "rocm_attn.py.orig")
    assert snapshot(tree) == before


def test_not_a_git_repository(tmp_path: Path) -> None:
    (tmp_path / "vllm").mkdir()
    refused(patchkit("apply", str(tmp_path)), "not a git checkout")


def test_git_repository_that_is_not_vllm(tmp_path: Path) -> None:
    Git(tmp_path).run("init", "--quiet")
    refused(patchkit("apply", str(tmp_path)), "not of vLLM")


def test_detached_head(tree: Path) -> None:
    Git(tree).run("checkout", "--quiet", "--detach")
    before = snapshot(tree)
    refused(patchkit("apply", str(tree)), "detached HEAD")
    assert snapshot(tree) == before


def test_git_missing_from_path(tree: Path) -> None:
    before = snapshot(tree)
    proc = patchkit("apply", str(tree), env={"PATH": str(Path(sys.executable).parent)})
    if shutil.which("git", path=str(Path(sys.executable).parent)):
        pytest.skip("git lives beside the Python interpreter")
    assert proc.returncode == 3
    assert "git was not found on PATH" in proc.stderr
    assert snapshot(tree) == before


def series_with(tmp_path: Path, patch_text: str | None, series_text: str) -> Path:
    patches = tmp_path / "patches"
    patches.mkdir()
    if patch_text is not None:
        (patches / "0001-evil.patch").write_text(patch_text)
    (patches / "series").write_text(series_text)
    return patches


@pytest.mark.parametrize(
    ("diff_path", "message"),
    [("../outside.py", "escapes the repository"), (".git/hooks/post-commit", ".git")],
)
def test_patch_paths_outside_the_tree(
    tree: Path, tmp_path: Path, diff_path: str, message: str
) -> None:
    text = (
        (PATCHES_DIR / PATCH_NAME)
        .read_text()
        .replace("vllm/v1/attention/backends/rocm_attn.py", diff_path)
    )
    patches = series_with(tmp_path, text, "0001-evil.patch\n")
    before = snapshot(tree)
    refused(patchkit("--patches", str(patches), "apply", str(tree)), message)
    assert snapshot(tree) == before


@pytest.mark.parametrize(
    ("patch_text", "series_text", "message"),
    [
        ("not a patch\n", "0001-evil.patch\n", "not a git format-patch file"),
        (None, "0001-missing.patch\n", "missing"),
        (None, "0001-a.patch -p1\n", "one patch file name"),
        (None, "", "lists no patches"),
    ],
)
def test_malformed_series_or_patch(
    tree: Path, tmp_path: Path, patch_text: str | None, series_text: str, message: str
) -> None:
    patches = series_with(tmp_path, patch_text, series_text)
    refused(patchkit("--patches", str(patches), "apply", str(tree)), message)


def start_apply(tree: Path) -> subprocess.Popen[str]:
    return start_patchkit("apply", "--json", str(tree))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_mid_apply_restores_everything(
    tree: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    started = install_hook(tree, tmp_path / "marks")
    before = snapshot(tree)
    proc = start_apply(tree)
    # Progress, not time: the hook runs inside git am, after the journal.
    wait_for(started, proc)
    assert (tree / ".git" / "rebase-apply").exists()
    assert journal_file(tree).exists()

    os.kill(proc.pid, sig)
    _, stderr = proc.communicate(timeout=120)
    (tmp_path / "marks" / "release").touch()

    assert proc.returncode == 130, stderr
    assert "restored" in stderr
    assert snapshot(tree) == before
    assert not (tree / ".git" / "rebase-apply").exists()


def test_sigkill_mid_apply_is_cleaned_up_by_the_next_run(
    tree: Path, tmp_path: Path
) -> None:
    started = install_hook(tree, tmp_path / "marks")
    head = Git(tree).head()
    proc = start_apply(tree)
    wait_for(started, proc)
    kill_everything(proc, started)  # patchkit, and git am with its hook
    assert (tree / ".git" / "rebase-apply").exists()  # half-done, as a crash leaves it
    assert journal_file(tree).exists()
    (tree / ".git" / "hooks" / "applypatch-msg").unlink()

    code, result = patchkit_json("apply", str(tree))

    assert code == 0, result
    assert any("interrupted 'apply' run" in note for note in result["notes"])
    assert result["status"] == "applied"
    git = Git(tree)
    assert git.out("rev-list", "--count", f"{head}..HEAD") == str(SERIES_LENGTH)
    assert git.is_clean()


def test_sigkill_of_apply_alone_stops_its_git_am(tree: Path, tmp_path: Path) -> None:
    """Only the toolkit is SIGKILLed (git and its hook are left to the
    kernel): git am does not run on behind it, finishing the patch and
    holding index.lock; its whole group is gone within seconds."""
    started = install_hook(tree, tmp_path / "marks")
    head = Git(tree).head()
    proc = start_apply(tree)
    wait_for(started, proc)
    git_group = int(started.read_text().split()[0])
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    try:
        deadline = time.monotonic() + 20
        while _group_alive(git_group) and time.monotonic() < deadline:
            time.sleep(0.1)
        alive = _group_alive(git_group)
    finally:
        (tmp_path / "marks" / "release").touch()  # the old code's hook: let it go
    assert not alive, "git am (or its hook) outlived the SIGKILLed toolkit"
    assert not (tree / ".git" / "index.lock").exists()
    assert Git(tree).head() == head  # nothing committed behind the toolkit's back


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def test_two_concurrent_runs(tree: Path, tmp_path: Path) -> None:
    started = install_hook(tree, tmp_path / "marks")
    head = as_user(tree).out("rev-parse", "HEAD")
    first = start_apply(tree)
    wait_for(started, first)

    second = patchkit("apply", str(tree))

    refused(second, "another vllm-patchkit run")
    (tmp_path / "marks" / "release").touch()
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert '"status": "applied"' in out
    # The series, on top of the checkout's own commits.
    count = as_user(tree).out("rev-list", "--count", f"{head}..HEAD")
    assert count == str(SERIES_LENGTH)
