"""``vllm-patchkit``: the command line over the vllm_patchkit library.

Each subcommand lives in :mod:`vllm_patchkit.commands` (or beside the
library it drives) and registers itself with ``add_parser``. This module
only maps exceptions to exit codes, in one place, and makes SIGTERM and
SIGHUP unwind like Ctrl-C. A :class:`~vllm_patchkit.errors.PatchkitError`
carries its own code; the few other exception types below are mapped once;
a JSON or encoding error is an error (3), never "refused, nothing changed".
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from vllm_patchkit.commands import (
    apply,
    audit,
    check,
    demo,
    doctor,
    matrix,
    pr,
    precommit,
    rebase,
    refresh,
    test,
    upstream,
)
from vllm_patchkit.commands.common import (
    EXIT_CODES_HELP,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_REFUSED,
    emit_json,
)
from vllm_patchkit.errors import PatchkitError
from vllm_patchkit.memcheck import command as memcheck_command
from vllm_patchkit.paths import PATCHES_DIR

TYPE_CHECKING = False  # typing costs every start-up; annotations only
if TYPE_CHECKING:
    from typing import Any

COMMANDS = (
    demo,
    apply,
    check,
    rebase,
    refresh,
    upstream,
    doctor,
    audit,
    matrix,
    test,
    precommit,
    pr,
    memcheck_command,
)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The toolkit's parser; given the ``argv`` it will parse, only the
    named command's arguments are defined up front (see ``_ListedOnly``)."""
    parser = argparse.ArgumentParser(
        prog="vllm-patchkit",
        description="Keep the vllm-overlay patch series (vLLM PR #51585) applied "
        "to vLLM trees, and prove it with real vLLM code. "
        "Run `vllm-patchkit COMMAND --help` for each command.",
        epilog=EXIT_CODES_HELP,
        formatter_class=_top_level_formatter,
    )
    parser.add_argument(
        "--patches",
        type=Path,
        default=PATCHES_DIR,
        metavar="DIR",
        help="the patch series directory (default: %(default)s)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    wanted = None if argv is None else _command_in(argv)
    for command in COMMANDS:
        if wanted is None:
            command.add_parser(commands)
        else:
            command.add_parser(_ListedOnly(commands, command, wanted))
    return parser


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


def _command_in(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names, as far as the top level's one option
    (``--patches DIR``, which argparse also takes abbreviated) shows it:
    ``""`` when it names none (``--help``, or no argument: every command is
    listed, none built), None when it cannot tell (after ``--``: all built)."""
    words = iter(argv)
    for word in words:
        if word == "--":
            return None
        if word.startswith("--p") and "--patches".startswith(word):
            next(words, None)
        elif not word.startswith("-"):
            return word
    return ""


class _ListedOnly:
    """The subparsers action as a command that is not being run sees it.

    Every start built every command's parser, a fifth of a ``check``'s CPU
    time; the command being run only needs its own. Another command is
    listed (its name and help, for ``--help`` and "invalid choice"), and its
    parser is built only if argparse ever asks for it (see ``_Deferred``).
    """

    def __init__(self, real: Any, module: Any, wanted: str) -> None:
        self.real, self.module, self.wanted = real, module, wanted

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        if name == self.wanted:
            return self.real.add_parser(name, **kwargs)
        pseudo = self.real._ChoicesPseudoAction(name, (), kwargs.get("help"))
        self.real._choices_actions.append(pseudo)
        self.real._name_parser_map[name] = _Deferred(self.real, self.module, name)
        return _Ignored()


class _Deferred:
    """A command's parser, built from its module when first used."""

    def __init__(self, real: Any, module: Any, name: str) -> None:
        self.real, self.module, self.name = real, module, name
        self.built: argparse.ArgumentParser | None = None

    def __getattr__(self, attribute: str) -> Any:
        if self.built is None:
            holder = argparse._SubParsersAction(
                [], prog=self.real._prog_prefix, parser_class=self.real._parser_class
            )
            self.module.add_parser(holder)
            self.built = holder._name_parser_map[self.name]
        return getattr(self.built, attribute)


class _Ignored:
    """Takes the argument definitions of a command that is not being run."""

    def __getattr__(self, attribute: str) -> Any:
        return lambda *args, **kwargs: self


def _terminate(signum: int, frame: object) -> None:
    # SIGTERM and SIGHUP (a closed terminal) unwind like Ctrl-C. Inside a
    # CheckoutGuard all three are handled there instead (gitcmd.py).
    raise KeyboardInterrupt(f"signal {signum}")


# The exception types below are imported when an exception is being matched,
# not at start-up: the libraries that define them (yaml, the package index
# client) load only for the commands that use them.


def _decode_errors() -> tuple[type[Exception], ...]:
    import json

    return (json.JSONDecodeError, UnicodeError)


def _refusals() -> tuple[type[Exception], ...]:
    from vllm_patchkit.series import SeriesError

    return (SeriesError, ValueError, FileExistsError)


def _environment_errors() -> tuple[type[Exception], ...]:
    import subprocess

    from vllm_patchkit.index import PackageIndexError
    from vllm_patchkit.precommit import PrecommitEnvironmentError

    return (
        PackageIndexError,
        PrecommitEnvironmentError,
        OSError,
        subprocess.SubprocessError,
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        # Outside a CheckoutGuard: nothing of a checkout was being changed.
        return _fail(args, "interrupted", "interrupted", EXIT_INTERRUPTED)
    except PatchkitError as exc:
        return _fail(args, exc.status, exc, exc.code)
    except _decode_errors() as exc:
        return _fail(args, "error", exc, EXIT_ERROR)
    except _refusals() as exc:
        # Input errors of modules that do not raise a PatchkitError yet.
        return _fail(args, "refused", exc, EXIT_REFUSED)
    except _environment_errors() as exc:
        return _fail(args, "error", exc, EXIT_ERROR)


def _fail(
    args: argparse.Namespace, status: str, exc: Exception | str, code: int
) -> int:
    """Say why on stderr; with --json, stdout still gets its one object."""
    notes = getattr(exc, "__notes__", [])
    text = "; ".join([str(exc), *notes])
    if getattr(args, "json", False):
        emit_json({"status": status, "error": text})
    label = "error" if status in ("error", "refused") else status
    print(f"vllm-patchkit: {label}: {text}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
