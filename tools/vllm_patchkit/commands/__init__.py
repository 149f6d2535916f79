"""One module per ``vllm-patchkit`` subcommand; each has ``add_parser``.

``--help`` builds every subcommand's parser (a run that names its command
builds that one alone: ``cli.named_command``; a new module is listed in
``cli.COMMANDS``), so a command module imports only the standard library,
:mod:`.common` and the exit codes (:mod:`vllm_patchkit.errors`) at module
level; the library it drives is imported in its handler. That keeps
``--help`` and the git-only commands at the cost of Python's start, not of
yaml, the package index client, or (through the regression suite) torch and
vLLM.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

TYPE_CHECKING = False  # typing costs every start-up; annotations only
if TYPE_CHECKING:
    from typing import Any


class _LazyHelp(argparse.Action):
    """``-h``/``--help`` that first lets the command fill in library-derived text."""

    def __init__(self, option_strings: list[str], fill: Callable, **kwargs: Any):
        kwargs.update(nargs=0, dest=argparse.SUPPRESS, default=argparse.SUPPRESS)
        super().__init__(option_strings, **kwargs)
        self.fill = fill

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        self.fill(parser)
        parser.print_help()
        parser.exit()


def lazy_help(
    parser: argparse.ArgumentParser, fill: Callable[[argparse.ArgumentParser], None]
) -> None:
    """Give ``parser`` (made with ``add_help=False``) a help that runs ``fill`` first.

    For help text that quotes a library constant (the mirror list, the demo's
    release): the library is imported only when that help is shown.
    """
    parser.add_argument(
        "-h", "--help", action=_LazyHelp, fill=fill, help="show this help and exit"
    )


def complete_help(parser: argparse.ArgumentParser) -> None:
    """Fill in ``parser``'s library-derived help text now, as ``--help``
    would, for a reader of the help that does not print it (the CLI
    reference page)."""
    for action in parser._actions:  # argparse keeps its actions only here
        if isinstance(action, _LazyHelp):
            action.fill(parser)
