"""Children die with the toolkit, however the toolkit dies.

The toolkit stops the children it starts (git, a tree's code) when it is
interrupted, but a SIGKILL (an OOM kill, ``kill -9``, a CI runner's
timeout) runs none of its code: a ``git am`` child would run on, finish
the patch behind the toolkit's back and hold ``index.lock`` while it does,
and the hooks it runs with it. Two guards, because each child runs in a
process group of its own (so that an interrupt stops it whole):

* :func:`dies_with_parent`, the ``preexec_fn`` that has the kernel signal
  the child when this process dies (Linux ``prctl(PR_SET_PDEATHSIG)``):
  git gets SIGTERM, on which it removes its lock files; a tree's code gets
  SIGKILL. The kernel sends it when the *thread* that started the child
  ends; every launcher here waits for its child in that thread.
* :func:`watched`: the child's whole group (a hook git runs, a worker a
  test starts) is registered with a watchdog, one small process per
  toolkit process, started with the first such child (git plumbing that
  runs no hook starts none), that reads a pipe only the toolkit holds. When the pipe
  closes (the toolkit exited, however) it sends SIGTERM, then SIGKILL, to
  every group still registered. A group is unregistered once its child is
  done, so a recycled group id is never signalled.

Elsewhere than Linux the first does nothing; the second works on any POSIX
system. git plumbing that runs no hook and ends on its own gets neither
(:data:`vllm_patchkit.gitcmd.HOOKLESS`).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator

PR_SET_PDEATHSIG = 1
"""From <linux/prctl.h>."""


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """The libc ``prctl``, looked up once, in the parent (not between fork
    and exec, where a lookup could take a lock another thread held)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # only to start a child, never at start-up

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    return getattr(libc, "prctl", None)


def dies_with_parent(signum: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the child sent ``signum`` when this process
    dies; None where the platform cannot do it. If this process died between
    the fork and the request, the child sends it to itself at once."""
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def request() -> None:
        prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signum)

    return request


STOP_GRACE_S = 2.0
"""The watchdog's wait between SIGTERM and SIGKILL to the groups left."""

_WATCHDOG = f"""
import os, signal, sys, time
groups = set()
for line in sys.stdin:
    op, group = line[:1], int(line[1:])
    (groups.add if op == "+" else groups.discard)(group)
def alive(group):
    try:
        os.killpg(group, 0)
    except OSError:
        return False
    return True
for sig in (signal.SIGTERM, signal.SIGKILL):
    for group in groups:
        try:
            os.killpg(group, sig)
        except OSError:
            pass
    deadline = time.monotonic() + {STOP_GRACE_S}
    while any(map(alive, groups)) and time.monotonic() < deadline:
        time.sleep(0.05)
"""
"""Reads ``+GROUP`` and ``-GROUP`` lines until the pipe closes, then stops
the groups left. Standard library only, started with ``-I -S``."""


class _Watchdog:
    """The one watchdog of this process, started with the first group."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid = 0
        self._lock = threading.Lock()  # the mutation runner starts from threads

    def send(self, line: str) -> None:
        with self._lock:
            if self._proc is None or self._pid != os.getpid():  # none, or forked
                self._start()
            assert self._proc is not None and self._proc.stdin is not None
            with contextlib.suppress(OSError):  # gone: the PDEATHSIG guard remains
                self._proc.stdin.write(line.encode())
                self._proc.stdin.flush()

    def _start(self) -> None:
        self._pid = os.getpid()
        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHDOG],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Its own group: Ctrl-C at the terminal must not stop it first.
            process_group=0,
        )
        atexit.register(self.close)

    def running(self) -> bool:
        return self._proc is not None and self._pid == os.getpid()

    def close(self) -> None:
        """At a normal exit: close the pipe and reap the watchdog (every
        group is unregistered by then, so it stops nothing)."""
        proc, self._proc = self._proc, None
        if proc is None or self._pid != os.getpid():
            return
        assert proc.stdin is not None
        with contextlib.suppress(OSError):
            proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_GRACE_S + 1)


_WATCH = _Watchdog()


def watchdog_running() -> bool:
    """Whether this process has started its watchdog: only a child that can
    run a hook or code of its own needs one (``gitcmd.HOOKLESS``)."""
    return _WATCH.running()


@contextlib.contextmanager
def watched(group: int) -> Iterator[None]:
    """Within the block, the process group ``group`` (a child started with
    ``process_group=0``: its pid) is stopped by the watchdog if this process
    dies. Leave the block only once the child has been waited for."""
    _WATCH.send(f"+{group}\n")
    try:
        yield
    finally:
        _WATCH.send(f"-{group}\n")
