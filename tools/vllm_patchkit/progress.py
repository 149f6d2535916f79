"""Progress on stderr for the steps that take seconds: which tree, which step,
elapsed. The one reporter of every command.

A person at a terminal waiting for ``demo``, ``test`` or ``pr`` (minutes, on
a first run) sees each step as it starts, and a line at least every
:data:`HEARTBEAT` seconds while one runs. A program reading ``--json`` and a
log (stderr not a terminal) get none of it: only errors reach them.
``VLLM_PATCHKIT_PROGRESS=1`` shows it anyway (a pipe a person watches),
``0`` never.

Commands turn it on in one place (``cli.error_handler`` calls
:func:`start`); library code only says what it is doing (:func:`step`,
:func:`phase`), which prints nothing when no command started it (tests,
library callers). ``matrix``'s per-release lines (:class:`Sweep`) are the
one exception: they are the sweep's record in a CI job's log, always shown.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

ENV = "VLLM_PATCHKIT_PROGRESS"
HEARTBEAT = 8.0
"""Seconds of silence inside a :func:`phase` before a "still" line."""

_lock = threading.Lock()
_state: dict[str, float] = {}
"""``start`` and ``last`` (perf_counter) and the run's ``generation`` while
on; empty while off."""
_runs = 0
_phases: list[tuple[str, float]] = []
"""The running phases, innermost last: (what, when it began)."""
_wake = threading.Condition(_lock)


def wanted(json_output: bool) -> bool:
    """Whether a command shows progress: ``VLLM_PATCHKIT_PROGRESS`` if set,
    else stderr is a terminal and the output is not ``--json`` (a closed
    stderr is no terminal)."""
    setting = os.environ.get(ENV, "").strip()
    if setting in ("0", "1"):
        return setting == "1"
    stream = sys.stderr
    try:
        return not json_output and stream is not None and stream.isatty()
    except (OSError, ValueError):  # closed
        return False


def start(json_output: bool) -> None:
    """Turn progress on for this command when :func:`wanted` says so."""
    if not wanted(json_output):
        return
    global _runs
    with _lock:
        now = time.perf_counter()
        _runs += 1
        _state.update(start=now, last=now, generation=_runs)
    threading.Thread(
        target=_heartbeat, args=(_runs,), name="progress", daemon=True
    ).start()


def stop() -> None:
    """Turn progress off (the command ended)."""
    with _lock:
        _state.clear()
        _phases.clear()
        _wake.notify_all()


def active() -> bool:
    return bool(_state)


def step(text: str) -> None:
    """One line: ``[  12s] text``; nothing while progress is off."""
    with _lock:
        _say(text)


@contextmanager
def phase(text: str) -> Iterator[None]:
    """:func:`step` ``text`` now, then "still" lines through any silence of
    :data:`HEARTBEAT` seconds until the block ends."""
    with _lock:
        entry = (text, time.perf_counter())
        _phases.append(entry)
        _say(text)
    try:
        yield
    finally:
        with _lock:
            if entry in _phases:
                _phases.remove(entry)


def _say(text: str) -> None:
    """Print under the lock, when on."""
    if not _state:
        return
    now = time.perf_counter()
    _state["last"] = now
    print(f"[{now - _state['start']:5.0f}s] {text}", file=sys.stderr, flush=True)


def _heartbeat(generation: int) -> None:
    """Fill silences inside a phase, until this run of progress stops."""
    with _lock:
        while _state.get("generation") == generation:
            silence = time.perf_counter() - _state["last"]
            if silence >= HEARTBEAT and _phases:
                text, began = _phases[-1]
                _say(f"  ... {text} ({time.perf_counter() - began:.0f}s)")
                silence = 0.0
            _wake.wait(HEARTBEAT - silence)


class Sweep:
    """``matrix``'s line per release and step, from any of its worker threads:
    ``[ 3/23]  1m05s vLLM 0.28.0   stock ...``. Always on: the workflow's
    job log (not a terminal) is where a sharded sweep is followed."""

    def __init__(self, total: int):
        self.total = total
        self.start = time.perf_counter()

    def __call__(self, index: int, version: str, message: str) -> None:
        now = time.perf_counter()
        width = len(str(self.total))
        minutes, seconds = divmod(int(now - self.start), 60)
        with _lock:
            if _state:
                _state["last"] = now
            print(
                f"[{index:>{width}}/{self.total}] {minutes:2d}m{seconds:02d}s "
                f"vLLM {version:<8} {message}",
                file=sys.stderr,
                flush=True,
            )
