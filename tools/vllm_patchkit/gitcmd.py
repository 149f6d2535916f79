"""The one git runner.

:func:`Git.run` fixes the environment (no pager, C locale) so that output
can be parsed, and starts git in a process group of its own, so that an
interrupt stops git and any hook it runs within seconds; a SIGKILL of the
toolkit stops them too (:mod:`vllm_patchkit.child_death`), except for
:data:`HOOKLESS` commands and ``hooks=False``, which end on their own.
Inside :func:`deferred_interrupts` a signal stops the running git and the
next :func:`Git.run` raises :class:`Interrupted`; :func:`shielded` lets a
rollback run to its end however many signals arrive.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from vllm_patchkit.child_death import dies_with_parent, watched
from vllm_patchkit.errors import EnvironmentFailure, Interrupted

# Identity used for commits the toolkit makes in trees it owns (release
# trees, scratch copies). Commits in a user's checkout keep the user's own.
TOOL_IDENTITY = {
    "GIT_AUTHOR_NAME": "vllm-patchkit",
    "GIT_AUTHOR_EMAIL": "vllm-patchkit@localhost",
    "GIT_COMMITTER_NAME": "vllm-patchkit",
    "GIT_COMMITTER_EMAIL": "vllm-patchkit@localhost",
}


class GitError(EnvironmentFailure, RuntimeError):
    """A git command failed; carries its arguments and output."""

    def __init__(self, args: list[str], returncode: int, stdout: str, stderr: str):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        detail = (stderr or stdout).strip()
        super().__init__(f"git {' '.join(args)} failed ({returncode}): {detail}")


class GitMissingError(EnvironmentFailure, RuntimeError):
    """git is not on PATH."""


def git_executable() -> str:
    path = shutil.which("git")
    if path is None:
        raise GitMissingError("git was not found on PATH; install git and retry")
    return path


HOOKLESS = frozenset(
    {
        "cat-file",
        "checkout-index",
        "describe",
        "for-each-ref",
        "hash-object",
        "log",
        "ls-tree",
        "merge-base",
        "patch-id",
        "rev-list",
        "rev-parse",
        "write-tree",
    }
)
"""git commands that run no hook and end on their own (after a SIGKILL of
the toolkit, at their next write to its closed pipe): they start without
the guards of :mod:`~vllm_patchkit.child_death`, which cost ``check`` a
fifth of its CPU (the watchdog process; ``fork`` instead of ``vfork``).
``update-index`` and ``apply`` are not here: writing an index runs
``post-index-change``, unless run with ``hooks=False``."""

NO_HOOKS = ("-c", f"core.hooksPath={os.devnull}")
"""For the toolkit's own scratch index, which no hook of the user's is for."""

STOP_GRACE_S = 2.0  # after SIGTERM to a git process group, before SIGKILL

HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Interrupts:
    """Process-wide interrupt state shared by the signal handler and Git.run."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.deferring = 0
        self.shielding = 0
        self.child_group: int | None = None
        self.stop_sent: float | None = None

    def handle(self, signum: int, frame: object) -> None:
        if self.signum is None:
            self.signum = signum
        if not self.shielding:
            self.stop_child()

    def stop_child(self) -> None:
        if self.child_group is not None and self.stop_sent is None:
            self.stop_sent = time.monotonic()
            _signal_group(self.child_group, signal.SIGTERM)

    def pending(self) -> bool:
        return self.signum is not None and not self.shielding

    def raise_pending(self) -> None:
        if self.pending():
            raise Interrupted(f"interrupted by {signal.Signals(self.signum).name}")


INTERRUPTS = _Interrupts()


def _signal_group(group: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP stop the running git; the next run() raises.

    Outside the main thread signals cannot be handled here; the block then
    runs with the process's handlers as they are.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, INTERRUPTS.handle) for s in HANDLED_SIGNALS}
    INTERRUPTS.deferring += 1
    try:
        yield
    finally:
        INTERRUPTS.deferring -= 1
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if not INTERRUPTS.deferring:
            INTERRUPTS.signum = None


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Run the block to its end: signals are recorded, git is not stopped."""
    INTERRUPTS.shielding += 1
    try:
        yield
    finally:
        INTERRUPTS.shielding -= 1


@dataclass(frozen=True)
class Git:
    """git bound to one working tree."""

    root: Path
    extra_env: tuple[tuple[str, str], ...] = ()
    _facts: dict[str, Path] = field(default_factory=dict, compare=False, repr=False)

    def run(
        self,
        *args: str,
        check: bool = True,
        input_text: str | None = None,
        env: dict[str, str] | None = None,
        hooks: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        """``git ARGS`` in :attr:`root`; ``hooks=False`` runs it with no hook
        (:data:`NO_HOOKS`)."""
        full_env = {
            **os.environ,
            "GIT_PAGER": "cat",
            "LC_ALL": "C",
            "GIT_TERMINAL_PROMPT": "0",
            **dict(self.extra_env),
            **(env or {}),
        }
        INTERRUPTS.raise_pending()
        command = [git_executable(), *(() if hooks else NO_HOOKS), *args]
        guard = hooks and args[0] not in HOOKLESS
        stdout, stderr, returncode = _run_in_own_group(
            command, self.root, full_env, input_text, guard=guard
        )
        INTERRUPTS.raise_pending()
        proc = subprocess.CompletedProcess(list(args), returncode, stdout, stderr)
        if check and proc.returncode != 0:
            raise GitError(list(args), proc.returncode, proc.stdout, proc.stderr)
        return proc

    def out(self, *args: str) -> str:
        return self.run(*args).stdout.strip()

    def toplevel(self) -> Path | None:
        """The repository's top level, or None when root is not in a work tree."""
        proc = self.run("rev-parse", "--show-toplevel", check=False)
        return Path(proc.stdout.strip()) if proc.returncode == 0 else None

    def head(self) -> str:
        return self.out("rev-parse", "--verify", "HEAD")

    def commit_of(self, rev: str) -> str | None:
        """The commit ``rev`` names, or None when it names none."""
        proc = self.run(
            "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False
        )
        return proc.stdout.strip() if proc.returncode == 0 else None

    def branch(self) -> str | None:
        """The checked-out branch, or None on a detached HEAD."""
        proc = self.run("symbolic-ref", "--quiet", "HEAD", check=False)
        return branch_of(proc.stdout.strip())

    def status_porcelain(self, untracked: bool = True, *, locks: bool = True) -> str:
        """``locks=False``: a reading that must not write the index either."""
        # "normal" lists an untracked directory as one entry instead of
        # walking it: enough to know the tree is not clean, and much faster.
        mode = "--untracked-files=normal" if untracked else "--untracked-files=no"
        no_locks = () if locks else ("--no-optional-locks",)
        return self.run(*no_locks, "status", "--porcelain=v1", "-z", mode).stdout

    def changed_paths(self, untracked: bool = True, *, locks: bool = True) -> list[str]:
        """The paths :meth:`status_porcelain` lists, a rename or copy by its
        new name."""
        paths = []
        fields = iter(self.status_porcelain(untracked, locks=locks).split("\0"))
        for entry in fields:
            if entry:
                paths.append(entry[3:])
                if {"R", "C"} & set(entry[:2]):
                    next(fields, None)  # its source
        return paths

    def is_clean(self) -> bool:
        """No staged, unstaged or untracked changes (ignored files don't count)."""
        return self.status_porcelain() == ""

    def commit_diffs(self, *args: str) -> str:
        """``git log ARGS``: each commit's id and diff, for :meth:`patch_ids`."""
        return self.run(
            "log", "--format=commit %H", "--patch", "--full-index", "--no-color", *args
        ).stdout

    def patch_ids(self, text: str) -> list[tuple[str, str]]:
        """``(stable patch-id, commit id)`` of every commit or mail in ``text``."""
        out = self.run("patch-id", "--stable", input_text=text).stdout
        return [(pid, commit) for pid, commit in map(str.split, out.splitlines())]

    def worktrees(self) -> list[str]:
        """Every work tree ``git worktree list`` names, the main one first."""
        listing = self.run("worktree", "list", "--porcelain").stdout.splitlines()
        return [
            x.removeprefix("worktree ") for x in listing if x.startswith("worktree ")
        ]

    def head_and_branch(self) -> tuple[str, str | None]:
        """:meth:`head` and :meth:`branch` in one git process."""
        head, ref = self.out("rev-parse", "HEAD", "--symbolic-full-name", "HEAD").split(
            "\n"
        )
        return head, branch_of(ref)

    def set_git_dir(self, git_dir: Path, objects: Path) -> None:
        """Record what the caller already asked git for."""
        self._facts["git_dir"], self._facts["objects"] = git_dir, objects

    def git_dir(self) -> Path:
        """This work tree's git directory (fixed for the object's lifetime)."""
        if "git_dir" not in self._facts:
            self._facts["git_dir"] = Path(self.out("rev-parse", "--absolute-git-dir"))
        return self._facts["git_dir"]

    def objects_dir(self) -> Path:
        """The object directory git writes to (``--git-path objects``)."""
        if "objects" not in self._facts:
            self._facts["objects"] = Path(
                self.out("rev-parse", "--path-format=absolute", "--git-path", "objects")
            )
        return self._facts["objects"]


def branch_of(ref: str) -> str | None:
    """The branch a full ref names (``refs/heads/x``: x), None for any other
    (a detached ``HEAD``). Never git's short form, which turns ambiguous
    for a branch named like a remote (``heads/origin``)."""
    return ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else None


def _run_in_own_group(
    command: list[str],
    cwd: Path,
    env: dict[str, str],
    input_text: str | None,
    *,
    guard: bool = True,
) -> tuple[str, str, int]:
    """Run ``command`` in a new process group; stop the group on an interrupt
    (``guard``: and if the toolkit dies).

    On a signal the group gets SIGTERM (git removes its lock files), then
    SIGKILL after STOP_GRACE_S; output that a stray child keeps open is
    given up on, so this returns within seconds whatever the children do.
    """
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        process_group=0,
        # A SIGKILL of the toolkit runs none of the code above: the kernel
        # sends git SIGTERM then, on which it removes its lock files.
        preexec_fn=dies_with_parent(signal.SIGTERM) if guard else None,
    )
    # And a hook it runs, by the watchdog.
    with watched(proc.pid) if guard else contextlib.nullcontext():
        return _wait_in_group(proc, input_text)


def _wait_in_group(
    proc: subprocess.Popen[str], input_text: str | None
) -> tuple[str, str, int]:
    """:func:`_run_in_own_group`'s wait: its output, or its group stopped."""
    outer = INTERRUPTS.child_group
    INTERRUPTS.child_group, INTERRUPTS.stop_sent = proc.pid, None
    try:
        while True:
            try:
                stdout, stderr = proc.communicate(input_text, timeout=0.5)
                return stdout, stderr, proc.returncode
            except subprocess.TimeoutExpired:
                input_text = None  # sent already; communicate refuses it twice
            if INTERRUPTS.pending():
                INTERRUPTS.stop_child()
            sent = INTERRUPTS.stop_sent
            if sent is not None and time.monotonic() - sent > STOP_GRACE_S:
                _signal_group(proc.pid, signal.SIGKILL)
                if proc.poll() is not None:
                    return "", "", proc.returncode
    except BaseException:
        # A KeyboardInterrupt outside deferred_interrupts(): stop the group.
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
        raise
    finally:
        INTERRUPTS.child_group, INTERRUPTS.stop_sent = outer, None
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_GRACE_S)


def init_repo(path: Path, *, initial_branch: str = "main") -> Git:
    path.mkdir(parents=True, exist_ok=True)
    git = Git(path, tuple(TOOL_IDENTITY.items()))
    git.run("init", "--quiet", f"--initial-branch={initial_branch}")
    # Release trees and scratch copies must not inherit a user's hooks,
    # autocrlf or signing settings, nor start a background gc: a commit of
    # a whole source tree would detach one that rewrites the repository
    # while it is cloned or renamed (whoever made it packs it when done).
    git.run("config", "core.autocrlf", "false")
    git.run("config", "commit.gpgsign", "false")
    git.run("config", "gc.auto", "0")
    git.run("config", "maintenance.auto", "false")
    return git
