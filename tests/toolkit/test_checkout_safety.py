"""A user's checkout under hard kills, later work, failing rollbacks, signals
and read-only repositories, on real release trees (issue #12).

Every case compares the checkout's whole state (cli_helpers.snapshot):
HEAD, branch, index, refs, stash, every file including ignored ones, and
git's state files including the toolkit's journal.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.toolkit.checkout_state import without_operation_state
from tests.toolkit.cli_helpers import (
    as_user,
    git_dir_bytes,
    install_hook,
    journal_file,
    kill_everything,
    patchkit,
    patchkit_json,
    snapshot,
    start_patchkit,
    wait_for,
)
from tests.toolkit.series_expectations import carried, stock_statuses
from vllm_patchkit.gitcmd import Git

pytestmark = pytest.mark.release_trees

CARRIED = len(carried("0.28.0"))
"""The patches apply commits on the 0.28.0 tree (every one, today)."""
TEST_FILE = "tests/v1/attention/test_rocm_attn_cudagraph_capture.py"
ROCM_ATTN = "vllm/v1/attention/backends/rocm_attn.py"
AITER_UNIFIED = "vllm/v1/attention/backends/rocm_aiter_unified_attn.py"


@pytest.fixture
def tree(release_clone: Callable[[str], Path]) -> Path:
    return release_clone("0.28.0")


def output(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stdout + proc.stderr


def killed_mid_apply(tree: Path, marks: Path, at: int = 1) -> None:
    """An apply SIGKILLed (with git and its hook) inside ``git am`` of the
    ``at``-th patch, after the journal was written."""
    started = install_hook(tree, marks, at=at)
    proc = start_patchkit("apply", "--json", str(tree))
    wait_for(started, proc)
    assert journal_file(tree).is_file()
    kill_everything(proc, started)
    (tree / ".git" / "hooks" / "applypatch-msg").unlink()
    assert (tree / ".git" / "rebase-apply").exists()


# 1. A dead run's journal ------------------------------------------------


@pytest.mark.parametrize("at", [1, 2])
def test_kill_then_next_apply_recovers_its_own_state(
    tree: Path, tmp_path: Path, at: int
) -> None:
    """Killed in am of patch 1 (nothing committed) or 2 (0001 committed):
    that state is the dead run's own, so the next apply recovers and applies."""
    git = Git(tree)
    head = git.head()
    killed_mid_apply(tree, tmp_path / "marks", at=at)
    assert git.out("rev-list", "--count", f"{head}..HEAD") == str(at - 1)

    code, result = patchkit_json("apply", str(tree))

    assert (code, result["status"]) == (0, "applied"), result
    assert any("interrupted 'apply' run" in n for n in result["notes"])
    assert git.out("rev-list", "--count", f"{head}..HEAD") == str(CARRIED)
    assert git.is_clean() and not journal_file(tree).exists()


def test_work_done_after_a_kill_is_never_destroyed(tree: Path, tmp_path: Path) -> None:
    """The issue's case: kill, then the user commits and edits a file."""
    killed_mid_apply(tree, tmp_path / "marks")
    user = as_user(tree)
    (tree / "MY_NOTES.md").write_text("my work\n")
    user.run("add", "MY_NOTES.md")
    user.run("commit", "--quiet", "-m", "my commit")
    (tree / "README.md").write_text("my edit\n")
    before = snapshot(tree)

    proc = patchkit("apply", str(tree))

    assert proc.returncode == 2, output(proc)
    assert str(journal_file(tree)) in output(proc)
    assert "--discard-journal" in output(proc) and "--recover" in output(proc)
    assert "Traceback" not in output(proc)
    assert snapshot(tree) == before


def test_recover_saves_what_it_puts_aside(tree: Path, tmp_path: Path) -> None:
    git = Git(tree)
    head = git.head()
    killed_mid_apply(tree, tmp_path / "marks")
    user = as_user(tree)
    user.run("am", "--abort")
    (tree / "MY_NOTES.md").write_text("my work\n")
    user.run("add", "MY_NOTES.md")
    user.run("commit", "--quiet", "-m", "my commit")
    mine = git.head()
    (tree / "README.md").write_text("my edit\n")

    code, result = patchkit_json("apply", "--recover", str(tree))

    assert (code, result["status"]) == (0, "applied"), result
    assert git.out("rev-list", "--count", f"{head}..HEAD") == str(CARRIED)
    saved = git.out(
        "for-each-ref", "--format=%(objectname)", "refs/vllm-patchkit/saved"
    )
    assert saved == mine
    user.run("stash", "pop", "--quiet")
    assert (tree / "README.md").read_text() == "my edit\n"


def test_discard_journal_keeps_the_checkout(tree: Path, tmp_path: Path) -> None:
    killed_mid_apply(tree, tmp_path / "marks")
    (tree / "README.md").write_text("my edit\n")
    before = snapshot(tree)

    proc = patchkit("apply", "--discard-journal", str(tree))

    assert proc.returncode == 2, output(proc)  # the dead run's am is still open
    assert "git am or rebase is in progress" in output(proc)
    after = snapshot(tree)
    del before["git_dir"]["vllm-patchkit/journal.json"]
    assert after == before


def test_a_switched_branch_is_not_forced_back(tree: Path, tmp_path: Path) -> None:
    killed_mid_apply(tree, tmp_path / "marks")
    user = as_user(tree)
    user.run("am", "--abort")
    user.run("switch", "--quiet", "-c", "elsewhere")
    before = snapshot(tree)

    proc = patchkit("apply", str(tree))

    assert proc.returncode == 2, output(proc)
    assert "the checkout is now on elsewhere" in output(proc)
    assert snapshot(tree) == before


@pytest.mark.parametrize("damage", ["extra key", "truncated", "not an object"])
def test_malformed_journal_is_named_not_a_traceback(tree: Path, damage: str) -> None:
    git = Git(tree)
    good = {"head": git.head(), "branch": git.branch(), "command": "apply", "pid": 1}
    text = {
        "extra key": json.dumps({**good, "surprise": True}),
        "truncated": json.dumps(good)[:30],
        "not an object": "[1, 2]",
    }[damage]
    journal_file(tree).parent.mkdir()
    journal_file(tree).write_text(text)
    before = snapshot(tree)

    proc = patchkit("apply", str(tree))

    assert proc.returncode == 2, output(proc)
    assert str(journal_file(tree)) in output(proc)
    assert "Traceback" not in output(proc)
    assert snapshot(tree) == before


# 2. Rollback that fails, signals ---------------------------------------------


def test_a_failed_rollback_keeps_the_journal_and_says_where(
    tree: Path, tmp_path: Path
) -> None:
    """0002's hook takes git's index lock and rejects: am fails, and so does
    the rollback (git cannot lock the index). Then the user fixes it."""
    git = Git(tree)
    head = git.head()
    install_hook(tree, tmp_path / "marks", at=2, action="lock")

    proc = patchkit("apply", str(tree))

    assert proc.returncode == 3, output(proc)
    text = output(proc)
    assert "the rollback did not complete" in text
    assert "git am is still in progress" in text
    assert "1 commit(s) on top" in text
    assert "restored" not in text
    assert journal_file(tree).is_file()
    assert git.out("rev-list", "--count", f"{head}..HEAD") == "1"

    (tree / ".git" / "index.lock").unlink()
    (tree / ".git" / "hooks" / "applypatch-msg").unlink()
    code, result = patchkit_json("apply", str(tree))
    assert (code, result["status"]) == (0, "applied"), result
    assert git.out("rev-list", "--count", f"{head}..HEAD") == str(CARRIED)


@pytest.fixture
def stubborn_run(tree: Path, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """An apply whose git am hook ignores signals and would sleep 600 s."""
    started = install_hook(tree, tmp_path / "marks", stubborn=True)
    proc = start_patchkit("apply", "--json", str(tree))
    wait_for(started, proc)
    assert journal_file(tree).is_file()
    yield proc
    if proc.poll() is None:
        kill_everything(proc, started)
    (tmp_path / "marks" / "release").touch()


@pytest.mark.parametrize(
    "sig",
    [
        signal.SIGINT,
        # The same handler for each: the extended tier sends the others.
        pytest.param(signal.SIGTERM, marks=pytest.mark.slow),
        pytest.param(signal.SIGHUP, marks=pytest.mark.slow),
    ],
)
def test_a_signal_returns_within_seconds_whatever_the_hook_does(
    tree: Path, stubborn_run: subprocess.Popen[str], sig: signal.Signals
) -> None:
    # The run under way has its am and journal open.
    before = without_operation_state(snapshot(tree))
    sent = time.monotonic()
    os.kill(stubborn_run.pid, sig)
    _, stderr = stubborn_run.communicate(timeout=120)
    took = time.monotonic() - sent

    assert stubborn_run.returncode == 130, stderr
    assert took < 60, f"took {took:.0f} s after {sig.name}"
    assert "the checkout was restored" in stderr
    assert snapshot(tree) == before


def test_a_second_ctrl_c_does_not_cut_the_rollback_short(
    tree: Path, stubborn_run: subprocess.Popen[str]
) -> None:
    before = without_operation_state(snapshot(tree))
    os.kill(stubborn_run.pid, signal.SIGINT)
    time.sleep(0.005)
    os.kill(stubborn_run.pid, signal.SIGINT)
    _, stderr = stubborn_run.communicate(timeout=120)

    assert stubborn_run.returncode == 130, stderr
    assert "the checkout was restored" in stderr
    assert snapshot(tree) == before


# 15. Exit codes: the environment is not a conflict -----------------------------


def test_a_hook_rejection_is_an_environment_error(tree: Path, tmp_path: Path) -> None:
    install_hook(tree, tmp_path / "marks", at=2, action="reject")
    before = snapshot(tree)

    proc = patchkit("apply", str(tree))

    assert proc.returncode == 3, output(proc)
    assert "a hook, the disk or permissions" in output(proc)
    assert "the checkout was restored" in output(proc)
    assert snapshot(tree) == before


def test_a_full_disk_is_an_environment_error(tree: Path) -> None:
    """The directory 0002 writes into sits on a tmpfs with no room left."""
    target = tree / Path(TEST_FILE).parent
    saved = {p.name: p.read_bytes() for p in target.iterdir() if p.is_file()}
    if any(p.is_dir() for p in target.iterdir()):
        pytest.skip(f"{target} has subdirectories")
    used = sum(len(b) // 4096 + 1 for b in saved.values()) * 4
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={used + 4}k", "tmpfs", str(target)],
        capture_output=True,
        text=True,
    )
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mount.stderr.strip()}")
    try:
        for name, data in saved.items():
            (target / name).write_bytes(data)
        filler = 0
        while True:  # fill what rounding left: an ignored, unrelated file
            try:
                with (target / "filler.bin").open("ab") as handle:
                    handle.write(b"\0" * 1024)
                filler += 1
            except OSError:
                break
        (tree / ".git" / "info" / "exclude").write_text("filler.bin\n")
        before = snapshot(tree)

        proc = patchkit("apply", str(tree))

        # git am itself does not say ENOSPC (its 3-way fallback then trips on
        # the half-written file); the patch applying here is what tells.
        assert proc.returncode == 3, output(proc)
        assert "a hook, the disk or permissions" in output(proc)
        assert "the checkout was restored" in output(proc)
        assert snapshot(tree) == before
    finally:
        subprocess.run(["umount", "--lazy", str(target)], check=False)


def test_a_bisect_in_progress_is_refused(tree: Path) -> None:
    as_user(tree).run("bisect", "start")
    before = snapshot(tree)

    proc = patchkit("apply", str(tree))

    assert proc.returncode == 2, output(proc)
    assert "bisect is in progress" in output(proc)
    assert snapshot(tree) == before


# 5, 6. What the run creates, and only that ------------------------------------


def test_an_ignored_file_where_a_patch_creates_one_is_refused(tree: Path) -> None:
    (tree / ".git" / "info" / "exclude").write_text(TEST_FILE + "\n")
    (tree / TEST_FILE).write_text("my local, ignored test\n")
    before = snapshot(tree)

    proc = patchkit("apply", str(tree))

    assert proc.returncode == 2, output(proc)
    assert TEST_FILE in output(proc)
    assert snapshot(tree) == before


def test_a_conflict_rollback_leaves_nothing_behind(tree: Path) -> None:
    """A user's change where 0003 edits the AITER unified module, on a 0.28.0
    checkout (its code is still 0.28.0's, so its version vouches for it and
    0003 is carried): 0001 and 0002 apply, git am -3 of 0003 conflicts; the
    rollback takes 0001 and 0002 back and keeps the user's files, ignored
    ones included. (A module turned into a directory, which once drove this
    test, now tells the version apart: the code decides, and 0003 is
    skipped as "target missing".)"""
    user = as_user(tree)
    module = tree / AITER_UNIFIED
    stock = "from vllm.v1.attention.backend import AttentionLayer, AttentionType, "
    text = module.read_text()
    assert stock + "MultipleOf\n" in text
    module.write_text(
        text.replace(stock + "MultipleOf\n", stock + "MultipleOf  # mine\n")
    )
    (tree / ".git" / "info" / "exclude").write_text("*.local\n")
    (tree / "vllm" / "notes.local").write_text("ignored, mine\n")
    user.run("commit", "--quiet", "-a", "-m", "a note on the AITER imports")
    before = snapshot(tree)

    proc = patchkit("apply", str(tree))

    assert proc.returncode == 4, output(proc)
    assert "0003-" in output(proc)
    assert snapshot(tree) == before
    assert patchkit("apply", str(tree)).returncode == 4  # not refused as dirty


# 8. check writes nothing, and answers the same on a read-only repository -------


def test_check_writes_nothing_under_git_even_read_only(tree: Path) -> None:
    Git(tree).run("status", "--porcelain")  # settle the index's stat data
    before = git_dir_bytes(tree)

    code, writable = patchkit_json("check", str(tree))

    assert code == 0, writable
    assert [p["status"] for p in writable["patches"]] == stock_statuses("0.28.0")
    assert writable["patches"][0]["status"] == "applies"
    assert git_dir_bytes(tree) == before

    git_dir = str(tree / ".git")
    bind = subprocess.run(["mount", "--bind", git_dir, git_dir], capture_output=True)
    if bind.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {bind.stderr.decode().strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", git_dir, git_dir], check=True)
        code, read_only = patchkit_json("check", str(tree))
    finally:
        subprocess.run(["umount", git_dir], check=False)

    assert code == 0, read_only
    assert read_only["patches"] == writable["patches"]
    assert git_dir_bytes(tree) == before
