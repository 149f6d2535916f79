"""What every subcommand shares: its parser, PATH and --json, output."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

TYPE_CHECKING = False  # typing costs every start-up; annotations only
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

EXIT_CODES_HELP = """\
exit codes:
  0  success (applied, already applied, nothing to report)
  1  the job ran and its verdict is bad (bug not fixed, a patch would conflict)
  2  refused or bad input: dirty or busy checkout, not a vLLM checkout,
     detached HEAD, operation in progress, a dead run's journal that is not
     safe to act on, malformed series; nothing was changed
  3  cannot judge, or environment error: a check the verdict rests on could
     not run (the output names it); git missing, package index unreachable,
     git failure,
     a hook, the disk or permissions failed an apply (rolled back), a
     rollback that did not complete (the message says where things are)
  4  conflict: a patch does not apply; everything was rolled back
  5  upstreamed: upstream already carries every patch; nothing was changed
  130  interrupted (SIGINT, SIGTERM, SIGHUP); the message says whether the
     checkout was restored or nothing was changed
"""


def add_command(
    commands: argparse._SubParsersAction, name: str, **kwargs: Any
) -> argparse.ArgumentParser:
    """A subcommand's parser: its description as written, the exit codes
    (:data:`EXIT_CODES_HELP`, unless ``epilog`` says otherwise) below it."""
    kwargs.setdefault("epilog", EXIT_CODES_HELP)
    return commands.add_parser(
        name, formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs
    )


def add_path(
    parser: argparse.ArgumentParser, what: str = "a vLLM git checkout"
) -> None:
    parser.add_argument(
        "path",
        nargs="?",
        type=Path,
        default=Path("."),
        help=f"{what} (default: the current directory)",
    )


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object on stdout"
    )


def _jsonable(value: Any) -> Any:
    """What json cannot write itself: a dataclass as its fields (nested ones
    too), anything else (a Path) as text."""
    import dataclasses  # here: every start-up imports this module

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return str(value)


def emit_json(payload: Any) -> None:
    import json

    json.dump(payload, sys.stdout, indent=2, default=_jsonable)
    sys.stdout.write("\n")


def emit(args: argparse.Namespace, payload: Any, text: Callable[[], str]) -> None:
    """``payload`` as one JSON object with --json, else ``text()`` for people."""
    if args.json:
        emit_json(payload)
    else:
        print(text())


def outcome(result: Any, patches: list[Any], *more: str) -> str:
    """A series operation's notes, status and message, then its patches."""
    notes = [f"note: {note}" for note in result.notes]
    status = f"{result.status}: {result.message}"
    return "\n".join([*notes, status, "\n".join(patch_lines(patches)), *more])


def patch_lines(patches: list[Any]) -> list[str]:
    from vllm_patchkit.git.carry import BY_VERSION  # loaded by then: it decided

    lines = []
    for patch in patches:
        lines.append(
            f"  {patch.name}: {patch.status}"
            + (f" ({patch.detail})" if patch.detail else "")
        )
        carry = getattr(patch, "carry", "")
        if carry:
            by = "" if carry.startswith(BY_VERSION) else "by its code: "
            lines.append(f"    carried {by}{carry}")
        for hunk in getattr(patch, "hunks", []):
            lines.append(f"    conflict at {hunk}")
    return lines
