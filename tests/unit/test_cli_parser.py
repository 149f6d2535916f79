"""``vllm-patchkit COMMAND`` builds that command's parser alone, and it is
the parser the full command line has for it.

``check`` runs in a pre-commit hook (issue #38): importing the thirteen
other command modules and building their parsers was a cost of every run.
:func:`vllm_patchkit.cli.named_command` picks the command out of the
arguments when that is plain; anything else builds every parser, for
argparse to answer as it always did.
"""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from vllm_patchkit.cli import COMMANDS, build_parser, named_command


def help_text(only: str | None, name: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser(only).parse_args([name, "--help"])
    return out.getvalue()


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_one_command_s_parser_is_the_full_one_s(name: str) -> None:
    assert help_text(name, name) == help_text(None, name)


def test_the_full_parser_lists_every_command_in_order() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    listed = re.findall(r"^    ([a-z-]+)", out.getvalue(), re.MULTILINE)
    assert listed == list(COMMANDS)


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["check", "tree"], "check"),
        (["check", "--json"], "check"),
        (["--patches", "dir", "apply", "tree"], "apply"),
        (["--patches=dir", "check"], "check"),
        (["--pat", "dir", "check"], "check"),
        (["--pa=dir", "check"], "check"),
        (["metadata-writes"], "metadata-writes"),
        (["--help"], None),
        (["-h", "check"], None),
        (["--version"], None),
        (["--patches", "--help"], None),
        (["--patches"], None),
        (["--", "check"], None),
        (["frobnicate"], None),
        ([], None),
    ],
)
def test_the_named_command(argv: list[str], named: str | None) -> None:
    assert named_command(argv) == named
