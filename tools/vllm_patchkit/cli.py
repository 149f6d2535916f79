"""``vllm-patchkit``: the command line over the vllm_patchkit library.

Each subcommand is a module of :mod:`vllm_patchkit.commands`. This one maps
exceptions to exit codes in one place (:func:`error_handler`), makes SIGTERM
and SIGHUP unwind like Ctrl-C, and runs with a standard stream closed.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys
from pathlib import Path

from vllm_overlay import __version__
from vllm_patchkit.commands.common import EXIT_CODES_HELP, emit_json
from vllm_patchkit.errors import EXIT_ERROR, EXIT_INTERRUPTED, PatchkitError
from vllm_patchkit.paths import PATCHES_DIR

TYPE_CHECKING = False  # typing costs every start-up; annotations only
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

COMMANDS = (
    "demo",
    "apply",
    "check",
    "rebase",
    "refresh",
    "upstream",
    "doctor",
    "audit",
    "metadata-writes",
    "matrix",
    "test",
    "precommit",
    "pr",
    "memcheck",
)
"""Each subcommand, in ``--help``'s order; its module in
:mod:`vllm_patchkit.commands` (dashes as underscores) defines it (``add_parser``)."""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The toolkit's parser, every command's arguments defined; with
    ``only``, that command's alone (the other modules are not imported)."""
    parser = argparse.ArgumentParser(
        prog="vllm-patchkit",
        description="Keep the vllm-overlay patch series (its fixes of vLLM) "
        "applied to vLLM trees, and prove them with real vLLM code. "
        "Run `vllm-patchkit COMMAND --help` for each command.",
        epilog=EXIT_CODES_HELP,
        formatter_class=_top_level_formatter,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s {__version__}",
        help="print the version (vllm_overlay.__version__, which both products "
        "carry) and exit",
    )
    parser.add_argument(
        "--patches",
        type=Path,
        default=PATCHES_DIR,
        metavar="DIR",
        help="the patch series directory (default: %(default)s)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        if only is None or name == only:
            # __import__, not importlib.import_module: -X importtime (the
            # start-up tests and benchmarks) sees only the former.
            path = f"vllm_patchkit.commands.{name.replace('-', '_')}"
            __import__(path, fromlist=("add_parser",)).add_parser(commands)
    return parser


def named_command(argv: list[str]) -> str | None:
    """The subcommand ``argv`` runs, when that is plain before parsing: its
    parser alone is then built (``check`` in a pre-commit hook does not
    import, nor build, the thirteen others). None for anything else
    (``--help``, ``--version``, an unknown or missing command), which builds
    them all, for argparse to answer as it does."""
    value_next = False
    for token in argv:
        if value_next:
            if token.startswith("-"):
                return None
            value_next = False
        elif token.startswith("--pa") and "--patches".startswith(token.split("=")[0]):
            value_next = "=" not in token  # --patches DIR, or its abbreviation
        elif token.startswith("-"):
            return None
        else:
            return token if token in COMMANDS else None
    return None


def _top_level_formatter(prog: str) -> argparse.HelpFormatter:
    """argparse's formatter at the width ``shutil.get_terminal_size`` gives
    (``COLUMNS``, else the terminal's, else 80), found without importing
    shutil: it loads zlib, bz2 and lzma, a tenth of ``--help``."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return argparse.RawDescriptionHelpFormatter(prog, width=(columns or 80) - 2)


def _terminate(signum: int, frame: object) -> None:
    # SIGTERM and SIGHUP (a closed terminal) unwind like Ctrl-C. Inside a
    # CheckoutGuard all three are handled there instead (gitcmd.py).
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    """The command line; without ``argv`` (the console script, ``python -m``)
    the process ends when it returns."""
    ending = argv is None
    if ending:
        gc.disable()  # until the command says whether it wants the collector
        _standard_streams()
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(named_command(argv)).parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    if not ending:
        return error_handler(args, args.handler)
    if getattr(args, "collect_garbage", True):
        gc.enable()
        return error_handler(args, args.handler)
    return _without_collection(args)


def _standard_streams() -> None:
    """Descriptors 0, 1 and 2 open, and ``sys.stdin``, ``sys.stdout`` and
    ``sys.stderr`` streams, whatever the caller closed (``2>&-``): a closed
    one becomes the null device. Python leaves a closed stream None (the
    first write fails, exit 1 with nothing said), and the next file the
    command opened would take its descriptor, so that git's messages, or a
    child's, would land in that file."""
    for fd, flags in ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, flags)  # the lowest free: fd itself
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    for name, fd, mode in (("stdin", 0, "r"), ("stdout", 1, "w"), ("stderr", 2, "w")):
        if getattr(sys, name) is None:
            errors = "backslashreplace" if name == "stderr" else None
            stream = open(fd, mode, closefd=False, errors=errors)  # noqa: SIM115
            setattr(sys, name, stream)


def _without_collection(args: argparse.Namespace) -> int:
    """Run a short command, whose process ends with it, without the cyclic
    garbage collector: its passes over what the imports and code readings
    make, and the last one on the way out, free nothing the exit would
    not, and were a tenth of ``check``'s CPU (issue #38). The objects are
    frozen at the end (``gc.freeze``), so the exit walks none of them."""
    try:
        return error_handler(args, args.handler)
    finally:
        gc.freeze()


def error_handler(
    args: argparse.Namespace, command: Callable[[argparse.Namespace], int]
) -> int:
    """Run ``command``; the one path from anything it raises to an exit code.

    A :class:`PatchkitError` carries its code and status word; Ctrl-C (and
    SIGTERM, SIGHUP) is 130; anything else is 3 (never "not fixed" nor
    "refused, nothing changed"), its traceback logged. With ``--json``
    stdout still gets one object. A reader that closes stdout or stderr
    early (``apply | head -1``) does not turn the result into an error.
    """
    from vllm_patchkit import progress

    stdout, stderr = sys.stdout, sys.stderr
    quiet = _QuietStream(stdout)
    sys.stdout = quiet  # type: ignore[assignment]
    sys.stderr = _QuietStream(stderr)  # type: ignore[assignment]
    try:
        progress.start(json_output=getattr(args, "json", False))
        code = command(args)
        quiet.flush()
        return code
    except KeyboardInterrupt:
        # Outside a CheckoutGuard: nothing of a checkout was being changed.
        return _fail(args, "interrupted", "interrupted", EXIT_INTERRUPTED)
    except PatchkitError as exc:
        return _fail(args, exc.status, exc, exc.code)
    except Exception as exc:  # noqa: BLE001 - the one place that maps the rest
        from vllm_patchkit.error_log import write_traceback  # the rare path

        log = write_traceback(exc)
        where = f"traceback in {log}" if log else "traceback above"
        text = f"unexpected {type(exc).__name__}: {_text(exc)} ({where})"
        return _fail(args, "error", text, EXIT_ERROR, log=log)
    finally:
        progress.stop()
        quiet.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = stdout, stderr


class _QuietStream:
    """stdout or stderr whose reader may go away: a closed pipe sends the
    rest of the output to the null device, as Python's documentation
    recommends, and the command goes on to its own exit code (SIGPIPE is
    ignored by Python). None (a caller's closed stream) takes nothing."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if self._stream is None:
            return len(text)
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._to_devnull()
            return len(text)

    def flush(self) -> None:
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._to_devnull()
        except ValueError:  # closed by the command itself
            pass

    def _to_devnull(self) -> None:
        import contextlib  # only once a reader has gone away

        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)
        with contextlib.suppress(OSError):
            self._stream.flush()  # what was buffered goes to the null device

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _text(exc: BaseException) -> str:
    notes = getattr(exc, "__notes__", [])
    return "; ".join([str(exc), *notes])


def _fail(
    args: argparse.Namespace,
    status: str,
    exc: Exception | str,
    code: int,
    log: Path | None = None,
) -> int:
    """Say why on stderr; with --json, stdout still gets its one object."""
    text = exc if isinstance(exc, str) else _text(exc)
    if getattr(args, "json", False):
        payload = {"status": status, "error": text}
        if log is not None:
            payload["log"] = str(log)
        emit_json(payload)
    label = "error" if status in ("error", "refused") else status
    print(f"vllm-patchkit: {label}: {text}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
