"""One toolkit run at a time per checkout, and recovery after a hard kill.

Every run that changes a checkout holds an exclusive ``flock`` on a file in
the checkout's git directory (released by the kernel even on SIGKILL) and
writes a journal with HEAD and the branch before touching anything. A
journal found by the next run means the previous one died half-way: the
guard aborts any ``git am`` it left and resets to the recorded HEAD. That
is lossless because runs refuse to start on a dirty tree.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from typing import IO

from vllm_patchkit.gitcmd import Git


class BusyError(RuntimeError):
    """Another vllm-patchkit run holds this checkout."""


@dataclass(frozen=True)
class Journal:
    head: str
    branch: str | None
    command: str
    pid: int


class CheckoutGuard:
    """Context manager: lock, recover a dead run's leftovers, journal."""

    def __init__(self, git: Git, command: str) -> None:
        self.git = git
        self.command = command
        self.directory = git.git_dir() / "vllm-patchkit"
        self.journal_file = self.directory / "journal.json"
        self._lock: IO[str] | None = None
        self.recovered: str | None = None

    def __enter__(self) -> CheckoutGuard:
        self.directory.mkdir(exist_ok=True)
        handle = (self.directory / "lock").open("w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise BusyError(
                f"{self.git.root}: another vllm-patchkit run is working on this "
                "checkout; try again when it has finished"
            ) from None
        self._lock = handle
        self.recovered = self._recover()
        return self

    def __exit__(self, *exc: object) -> None:
        self.journal_file.unlink(missing_ok=True)
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    def begin(self, head: str | None = None, branch: str | None = None) -> Journal:
        """Record the state to return to, before the first change.

        Callers that already know HEAD and the branch pass them in.
        """
        if head is None:
            head, branch = self.git.head(), self.git.branch()
        journal = Journal(head, branch, self.command, os.getpid())
        partial = self.journal_file.with_suffix(".tmp")
        partial.write_text(json.dumps(journal.__dict__))
        partial.replace(self.journal_file)
        return journal

    def _recover(self) -> str | None:
        if not self.journal_file.is_file():
            return None
        journal = Journal(**json.loads(self.journal_file.read_text()))
        restore(self.git, journal.head, journal.branch)
        self.journal_file.unlink()
        return (
            f"an interrupted '{journal.command}' run (pid {journal.pid}) was cleaned "
            f"up: the checkout is back at {journal.head[:12]}"
            + (f" on {journal.branch}" if journal.branch else "")
        )


def restore(git: Git, head: str, branch: str | None) -> None:
    """Abort a half-done ``git am`` and put HEAD, branch, index, tree back."""
    if (git.git_dir() / "rebase-apply").exists():
        git.run("am", "--abort", check=False)
    if branch is not None and git.branch() != branch:
        git.run("checkout", "--quiet", "--force", branch)
    git.run("reset", "--hard", "--quiet", head)
