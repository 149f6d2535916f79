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
    says so.
    """
    with tempfile.TemporaryDirectory(prefix=scratch_prefix) as scratch:
        output = Path(scratch) / output_name
        argv = (sys.executable, "-m", module, *args(output))
        try:
            proc = subprocess.run(
                argv,
                cwd=scratch,
                env=dict(env),
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired as exc:
            # On a timeout subprocess hands back bytes, text=True or not.
            log = _text(exc.stdout) + _text(exc.stderr)
            return ChildResult(argv, None, None, log)
        data = json.loads(output.read_text()) if output.is_file() else None
    return ChildResult(argv, proc.returncode, data, proc.stdout + proc.stderr)


def _text(stream: str | bytes | None) -> str:
    if isinstance(stream, bytes):
        return stream.decode(errors="replace")
    return stream or ""
