"""Run a module as a child process and read back the JSON report it writes.

The steps that import torch and vLLM (the regression suite, the audit's
dynamic pass, the overlay probe) do it in a child process, so the parent
stays free of both and each run gets a fresh interpreter: ``python -m
MODULE ...`` in a scratch directory, which writes its report to a file
there for the parent to read. This module is that round trip, once; what a
missing report, an exit status or a timeout means is each caller's to say.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ChildResult:
    """What one child run left: its exit status, its report and its output."""

    argv: tuple[str, ...]
    """The command as started (``sys.executable -m MODULE ...``)."""
    returncode: int | None
    """The child's exit status; None when it ran past the timeout (killed)."""
    data: Any
    """The JSON the child wrote, parsed; None when it wrote no report."""
    log: str
    """Its stdout, then its stderr (what it printed before a timeout)."""

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def run_json_child(
    module: str,
    args: Callable[[Path], Sequence[str]],
    *,
    env: Mapping[str, str],
    timeout_s: float,
    scratch_prefix: str,
    output_name: str = "report.json",
) -> ChildResult:
    """Run ``python -m module *args(output)`` in a fresh scratch directory.

    ``args`` gets the path the child must write its JSON to (inside the
    scratch directory, which is also its working directory and is removed
    afterwards) and returns the arguments that tell it so. The report is
    read whatever the exit status; a report that is not JSON raises
    ``ValueError`` (a child that writes half a report is a bug to see, not a
    result). Only a timeout is caught: the child is killed and the result
    says so. What the child started is killed with it, when it exits.
    """
    with tempfile.TemporaryDirectory(prefix=scratch_prefix) as scratch:
        output = Path(scratch) / output_name
        argv = (sys.executable, "-m", module, *args(output))
        returncode, log = _run_in_own_group(argv, Path(scratch), env, timeout_s)
        data = json.loads(output.read_text()) if output.is_file() else None
    return ChildResult(argv, returncode, data, log)


def _run_in_own_group(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], timeout_s: float
) -> tuple[int | None, str]:
    """Run ``argv`` in a process group of its own; its exit status (None past
    the timeout) and its stdout then stderr.

    The code run may start processes of its own (a tree that starts one at
    import). They are in the group, which is killed once the child exits or
    times out (or this process is interrupted), so none is left behind; and
    their output goes to files this function owns, never to a pipe whose
    other end they could hold open past the child's exit.
    """
    out_path, err_path = cwd / ".child-stdout", cwd / ".child-stderr"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            process_group=0,
        )
        try:
            returncode: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            returncode = None
        finally:
            _kill_group(proc)
    log = _text(out_path.read_bytes()) + _text(err_path.read_bytes())
    return returncode, log


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child's whole process group and reap the child."""
    import contextlib
    import os
    import signal

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _text(stream: str | bytes | None) -> str:
    if isinstance(stream, bytes):
        return stream.decode(errors="replace")
    return stream or ""
