"""Helpers for driving ``vllm-patchkit`` as a user would: a real subprocess."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# The one whole-checkout state helper, re-exported for the tests that take
# their helpers from here.
from tests.toolkit.checkout_state import git_dir_bytes, snapshot  # noqa: F401
from vllm_patchkit.gitcmd import Git


def patchkit(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vllm_patchkit", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
        timeout=900,
    )


def patchkit_json(*args: str, cwd: Path | None = None) -> tuple[int, dict[str, Any]]:
    proc = patchkit(*args, "--json", cwd=cwd)
    assert proc.stdout.strip(), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


USER = {
    "GIT_AUTHOR_NAME": "Fork Maintainer",
    "GIT_AUTHOR_EMAIL": "fork@example.invalid",
    "GIT_COMMITTER_NAME": "Fork Maintainer",
    "GIT_COMMITTER_EMAIL": "fork@example.invalid",
}


def as_user(root: Path) -> Git:
    return Git(root, tuple(USER.items()))


ROCM_ATTN = "vllm/v1/attention/backends/rocm_attn.py"


def upstream_rewrites_the_zeroing(upstream: Path, work: Path, branch: str) -> Git:
    """A clone of ``upstream`` at v0.28.0 whose ``branch`` rewrites the two
    zeroing lines another way (a loop), so 0001 conflicts on top of it."""
    Git(work.parent).run(
        "clone", "--quiet", "--branch", "v0.28.0", str(upstream), str(work)
    )
    git = as_user(work)
    git.run("switch", "--quiet", "-C", branch)
    source = work / ROCM_ATTN
    text = source.read_text()
    rewritten = text.replace(
        "        common_attn_metadata.query_start_loc.zero_()\n"
        "        common_attn_metadata.query_start_loc_cpu.zero_()\n",
        "        for offsets in (\n"
        "            common_attn_metadata.query_start_loc,\n"
        "            common_attn_metadata.query_start_loc_cpu,\n"
        "        ):\n"
        "            offsets.zero_()\n",
    )
    assert rewritten != text
    source.write_text(rewritten)
    git.run("commit", "--quiet", "-am", "[Misc] zero offsets in a loop")
    return git


USER_WORK = "examples/local_notes.md"
"""The file :func:`user_commit` adds: a user's own work, outside ``vllm/``."""


def user_commit(git: Git) -> str:
    """Commit a change of a user's own on top of a clone (as a user's
    checkout has: the tag's release, with commits on top); its id."""
    notes = git.root / USER_WORK
    with notes.open("a") as handle:  # each call commits one more line
        handle.write("A local note, not part of vLLM.\n")
    git.run("add", USER_WORK)
    git.run("commit", "--quiet", "--no-verify", "-m", "Local notes")
    return git.out("rev-parse", "HEAD")


FORGED_MARKER = "vllm-patchkit-owned"
"""The file an older toolkit took, at the top of a worktree, for its own."""


def forks_worktree(fork: Path, worktree: Path) -> Path:
    """A worktree at ``worktree`` of a fork (made at ``fork``) that tracks
    :data:`FORGED_MARKER`, holding a commit of its own, an edited tracked
    file and an untracked one: work found nowhere else."""
    fork.mkdir(parents=True)
    git = as_user(fork)
    git.run("init", "--quiet", "--initial-branch=main")
    (fork / FORGED_MARKER).write_text("Created by vllm-patchkit\n")
    (fork / "code.py").write_text("x = 1\n")
    git.run("add", ".")
    git.run("commit", "--quiet", "-m", "fork")
    git.run("worktree", "add", "--quiet", "-b", "topic", str(worktree))
    (worktree / "mine.txt").write_text("mine\n")
    as_user(worktree).run("add", "mine.txt")
    as_user(worktree).run("commit", "--quiet", "-m", "my unpushed work")
    (worktree / "code.py").write_text("x = 2\n")
    (worktree / "draft.py").write_text("print('draft')\n")
    return worktree


def journal_file(root: Path) -> Path:
    return root / ".git" / "vllm-patchkit" / "journal.json"


def install_hook(
    root: Path,
    marks: Path,
    *,
    at: int = 1,
    action: str = "wait",
    stubborn: bool = False,
) -> Path:
    """An ``applypatch-msg`` hook (git am runs it for each patch) that lets
    patches before the ``at``-th through, then writes its process group to
    ``marks/started`` and does ``action``: "wait" for ``marks/release``
    (600 s at most), "reject" (exit 1), or "lock" (create .git/index.lock,
    then reject). ``stubborn`` hooks ignore SIGINT, SIGTERM and SIGHUP.
    Returns the ``started`` file."""
    marks.mkdir(parents=True, exist_ok=True)
    started, release, count = marks / "started", marks / "release", marks / "count"
    actions = {
        "wait": (
            "i=0\n"
            f"while [ ! -e '{release}' ] && [ $i -lt 6000 ]; do\n"
            "  sleep 0.1; i=$((i + 1))\n"
            "done\n"
        ),
        "reject": "exit 1\n",
        "lock": f"touch '{root / '.git' / 'index.lock'}'\nexit 1\n",
    }
    hook = root / ".git" / "hooks" / "applypatch-msg"
    hook.write_text(
        "#!/bin/sh\n"
        + ("trap '' INT TERM HUP\n" if stubborn else "")
        + f"n=$(cat '{count}' 2>/dev/null || echo 0); n=$((n + 1))\n"
        + f"echo $n > '{count}'\n"
        + f"[ $n -lt {at} ] && exit 0\n"
        + f"cut -d' ' -f5 /proc/$$/stat > '{started}.tmp'\n"
        + f"mv '{started}.tmp' '{started}'\n"
        + actions[action]
    )
    hook.chmod(0o755)
    return started


def start_patchkit(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "vllm_patchkit", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        start_new_session=True,
    )


def wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 600) -> None:
    """Until ``path`` exists (a real mark of progress), while ``proc`` runs."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def kill_everything(proc: subprocess.Popen[str], started: Path) -> None:
    """SIGKILL the run and git with its hook, as a crash or OOM kill would."""
    git_group = int(started.read_text().split()[0])
    os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(git_group, signal.SIGKILL)
    proc.communicate(timeout=60)
