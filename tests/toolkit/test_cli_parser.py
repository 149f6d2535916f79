"""The parser built for one command is the full parser, for that command.

``cli.build_parser(argv)`` defines only the named command's arguments up
front (every start built all twelve, a fifth of ``check``'s CPU time). The
full parser (``build_parser()``) is the oracle: the top-level help, each
command's own help and what parsing gives must be the same, also when the
guess from ``argv`` is wrong and argparse asks for another command's parser.
In-process: no CLI start-up to pay.
"""

from __future__ import annotations

import argparse

import pytest

from vllm_patchkit.cli import build_parser


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


FULL = build_parser()
NAMES = list(_subparsers(FULL).choices)


def test_the_top_level_help_lists_every_command_as_before() -> None:
    assert len(NAMES) >= 12
    for argv in ([], ["--help"], ["check"], ["--patches", "check", "apply"]):
        assert build_parser(argv).format_help() == FULL.format_help(), argv


@pytest.mark.parametrize("name", NAMES)
def test_each_command_gets_its_whole_parser(name: str) -> None:
    wanted = _subparsers(FULL).choices[name].format_help()
    for argv in ([name], ["--pat", "DIR", name], ["--patches=DIR", name]):
        lazy = _subparsers(build_parser(argv)).choices[name]
        assert isinstance(lazy, argparse.ArgumentParser), argv
        assert lazy.format_help() == wanted, argv
    # Built for another command: argparse still gets the whole parser.
    other = next(n for n in NAMES if n != name)
    assert _subparsers(build_parser([other])).choices[name].format_help() == wanted


def test_parsing_gives_what_the_full_parser_gives() -> None:
    cases = [
        ["apply", "--recover", "/x"],
        ["--patches", "apply", "check", "--json", "/x"],
        ["doctor", "--json"],
        ["refresh", "--base", "v1", "/x"],
    ]
    for argv in cases:
        expected = vars(FULL.parse_args(argv))
        assert vars(build_parser(argv).parse_args(argv)) == expected, argv
        # The guess names another command: the same result.
        assert vars(build_parser(["check"]).parse_args(argv)) == expected, argv
