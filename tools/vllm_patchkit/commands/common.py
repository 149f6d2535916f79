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


def to_jsonable(value: Any) -> Any:
    import dataclasses  # here: every start-up imports this module

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: to_jsonable(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def emit_json(payload: Any) -> None:
    import json

    json.dump(to_jsonable(payload), sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def emit(args: argparse.Namespace, payload: Any, text: Callable[[], str]) -> None:
    """``payload`` as one JSON object with --json, else ``text()`` for people."""
    if args.json:
        emit_json(payload)
    else:
        print(text())


def print_outcome(result: Any, patches: list[Any]) -> None:
    """A series operation's notes, status and message, then its patches."""
    for note in result.notes:
        print(f"note: {note}")
    print(f"{result.status}: {result.message}")
    print("\n".join(patch_lines(patches)))


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
