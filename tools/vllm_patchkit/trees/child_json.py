"""Child processes: each in a group of its own, and the JSON round trip.

The steps that import torch and vLLM (the regression suite, the audit's
dynamic pass, the overlay probe) do it in a child process, so the parent
stays free of both and each run gets a fresh interpreter: ``python -m
MODULE ...`` in a scratch directory, which writes its report to a file
there for the parent to read. This module is that round trip, once, and
:func:`run_in_group`, the one way a child is started, timed out and
cleaned up (with every process it started); what a missing report, an
exit status or a timeout means is each caller's to say.
"""

from __future__ import annotations

import contextlib
import gc
import getpass
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from vllm_patchkit.child_death import dies_with_parent, watched
from vllm_patchkit.trees import bytecode


@dataclass(frozen=True)
class Finished:
    """What a child left: its exit status (None: killed past the timeout)."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str = ""
    stderr: str = ""

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def log(self) -> str:
        return self.stdout + self.stderr


@dataclass(frozen=True)
class ChildResult(Finished):
    """A :func:`run_json_child` run: also the JSON report it wrote, parsed
    (None when it wrote none)."""

    data: Any = None


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
        done = run_in_group(argv, cwd=Path(scratch), env=env, timeout_s=timeout_s)
        data = json.loads(output.read_text()) if output.is_file() else None
    return ChildResult(argv, done.returncode, done.stdout, done.stderr, data)


def run_in_group(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float | None,
    stdin: str | None = None,
    log: Path | None = None,
    inherit_stdio: bool = False,
) -> Finished:
    """Run ``argv`` in a process group of its own and kill the group after.

    The code run may start processes of its own; they are in the group,
    which is killed once the child exits, times out or this process is
    interrupted, so none is left behind. Their output goes to files this
    function owns (``log``: both streams to that file; else scratch files
    read back), never to a pipe whose other end they could hold open past
    the child's exit. ``inherit_stdio``: the child uses this process's
    streams and stays in its process group, in the terminal's foreground (an
    interactive script: it may read the terminal, and Ctrl-C reaches it);
    this process waits for it, so nothing is left to kill.

    The child's temporary directory (``TMPDIR``) is one of this function's,
    removed with the rest when the child ends, is killed, or this process
    is interrupted: what the child and its processes make there
    (the regression harness's model files) is never left behind. An
    interactive child keeps the user's.
    """
    # A SIGKILL of this process runs no cleanup: the kernel kills the child
    # then (child_death).
    orphaned = dies_with_parent(signal.SIGKILL)
    if inherit_stdio:
        interactive = subprocess.Popen(
            list(argv), cwd=cwd, env=dict(env), preexec_fn=orphaned
        )
        return Finished(tuple(argv), interactive.wait(timeout=timeout_s))
    with tempfile.TemporaryDirectory(prefix="vllm-patchkit-child-") as scratch:
        out_path = log or Path(scratch) / "stdout"
        err_path = Path(scratch) / "stderr"
        in_path = Path(scratch) / "stdin"
        in_path.write_text(stdin or "")
        env = _with_own_tmpdir(env, Path(scratch) / "tmp")
        with contextlib.ExitStack() as files:
            out = files.enter_context(out_path.open("wb"))
            err = out if log else files.enter_context(err_path.open("wb"))
            source = files.enter_context(in_path.open("rb"))
            proc = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=dict(env),
                process_group=0,
                preexec_fn=orphaned,
                stdin=source if stdin is not None else subprocess.DEVNULL,
                stdout=out,
                stderr=err,
            )
            try:
                with watched(proc.pid):  # its grandchildren too, if we are killed
                    try:
                        returncode: int | None = proc.wait(timeout=timeout_s)
                    except subprocess.TimeoutExpired:
                        returncode = None
                    finally:
                        _kill_group(proc)
            finally:
                # Interrupted before the watch began (a signal while the
                # watchdog starts): the group still goes.
                if proc.returncode is None:
                    _kill_group(proc)
        if log is not None:
            return Finished(tuple(argv), returncode)
        return Finished(
            tuple(argv),
            returncode,
            out_path.read_bytes().decode(errors="replace"),
            err_path.read_bytes().decode(errors="replace"),
        )


def _with_own_tmpdir(env: Mapping[str, str], tmp: Path) -> dict[str, str]:
    """``env`` with ``tmp`` (made) as the temporary directory; torch's
    compile cache stays where it was (under the user's), kept across runs."""
    tmp.mkdir(mode=0o700)
    inductor = os.path.join(tempfile.gettempdir(), f"torchinductor_{_user()}")
    return {
        **env,
        "TORCHINDUCTOR_CACHE_DIR": env.get("TORCHINDUCTOR_CACHE_DIR", inductor),
        "TMPDIR": str(tmp),
    }


def _user() -> str:
    """The name torch gives its compile cache (``getpass.getuser``)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child's whole process group and reap the child."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def exit_with(main: Callable[[], int]) -> NoReturn:
    """Run a child process (``python -m MODULE``) and end it with
    ``main()``'s status.

    The tree's modules compile through the bytecode cache its launcher
    names (:mod:`vllm_patchkit.trees.bytecode`), and without the cyclic
    garbage collector: the child imports torch and vLLM, runs for seconds
    and ends, and the collector's passes over what those imports make free
    nothing its exit would not (about a tenth of a suite run's CPU). Only
    at a child's entry point: ``main`` called in-process keeps its caller's
    importers and collector.
    """
    bytecode.install()
    gc.disable()
    sys.exit(main())
