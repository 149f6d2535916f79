"""The command-line reference page, rendered from the argparse definitions.

``docs/reference/cli.md`` is this module's output, committed; a test renders
it again and fails when the page and the parsers disagree, or when a command,
option or argument has no help text. A new option therefore cannot land
undocumented. Regenerate with ``python -m vllm_patchkit.cli_reference``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from vllm_patchkit.commands import complete_help
from vllm_patchkit.commands.common import EXIT_CODES_HELP
from vllm_patchkit.paths import PROJECT_ROOT, relative_to_checkout
from vllm_patchkit.present.tables import markdown_cell, markdown_table

PAGE = PROJECT_ROOT / "docs" / "reference" / "cli.md"

HEADER = """\
# Command-line reference

Every command, option and argument of `vllm-patchkit` and of the overlay's
`python -m vllm_overlay`, rendered from their argparse definitions by
`python -m vllm_patchkit.cli_reference` (do not edit by hand:
`tests/toolkit/test_cli_reference.py` fails when this page and the parsers
disagree, or when one of them lacks its help text). Exit codes, environment
variables and cache paths: [settings](settings.md).
"""


@dataclass(frozen=True)
class Command:
    """One parser to document: its invocation and its argparse parser."""

    invocation: str
    summary: str
    parser: argparse.ArgumentParser


def all_commands() -> list[Command]:
    """The toolkit's top-level parser, each subcommand's in the order
    ``vllm-patchkit --help`` lists them, then the overlay's doctor."""
    from vllm_overlay.doctor import build_parser as overlay_parser
    from vllm_patchkit.cli import build_parser

    top = build_parser()  # argparse keeps a parser's actions in _actions only
    found = [Command("vllm-patchkit", top.description or "", top)]
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, parser in action.choices.items():
                complete_help(parser)
                found.append(
                    Command(f"vllm-patchkit {name}", helps.get(name, ""), parser)
                )
    overlay = overlay_parser()
    return [*found, Command(overlay.prog, "the overlay's doctor", overlay)]


def undocumented(commands: list[Command]) -> list[str]:
    """Every command without a summary or description, and every option or
    argument without help text, as ``invocation option``."""
    missing = []
    for command in commands:
        if not command.summary.strip() or not (command.parser.description or ""):
            missing.append(f"{command.invocation} (no summary or description)")
        for action in command.parser._actions:
            if _listed(action) and not (action.help or "").strip():
                missing.append(f"{command.invocation} {_name(action)}")
    return missing


def _listed(action: argparse.Action) -> bool:
    """An option or argument of the page's tables (not --help, not hidden)."""
    skipped = argparse._HelpAction | argparse._SubParsersAction
    return action.help != argparse.SUPPRESS and not isinstance(action, skipped)


def _name(action: argparse.Action) -> str:
    return ", ".join(action.option_strings) or action.metavar or action.dest


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.choices is not None:  # a subparsers action is not _listed
        return "{" + ",".join(str(c) for c in action.choices) + "}"
    metavar = action.metavar or action.dest.upper()
    if action.nargs in ("*", "+"):
        return f"{metavar} ..."
    return str(metavar)


def _help(action: argparse.Action, prog: str) -> str:
    """The help text with argparse's ``%(name)s`` placeholders filled in, as
    ``--help`` prints it."""
    params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
    params["prog"] = prog
    if action.choices is not None:
        params["choices"] = ", ".join(str(c) for c in action.choices)
    for key, value in params.items():
        if hasattr(value, "__name__"):
            params[key] = value.__name__
    text = (action.help or "") % params
    # The same page from any checkout, on any machine.
    text = relative_to_checkout(text).replace(str(Path.home()), "~")
    if isinstance(action, argparse._AppendAction | argparse._ExtendAction):
        text += " (repeatable)"
    return " ".join(text.split())


def _options_table(command: Command) -> list[str]:
    rows = []
    for action in command.parser._actions:
        if not _listed(action):
            continue
        name = _name(action)
        value = _value(action)
        value = f"`{markdown_cell(value)}`" if value else ""
        help_text = markdown_cell(_help(action, command.parser.prog))
        rows.append((f"`{name}`", value, help_text))
    if not rows:
        return ["No options but `--help`."]
    return markdown_table(("option or argument", "value", "what it does"), rows)


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=88)
    formatter.add_usage(parser.usage, parser._actions, [])
    return formatter.format_help().strip()


def _anchor(invocation: str) -> str:
    return invocation.replace(" ", "-").replace(".", "")


def render(commands: list[Command] | None = None) -> str:
    """The whole page."""
    commands = all_commands() if commands is None else commands
    rows = [
        (
            f"[`{command.invocation}`](#{_anchor(command.invocation)})",
            markdown_cell(" ".join(command.summary.split())),
        )
        for command in commands
    ]
    lines = [HEADER, *markdown_table(("command", "what it does"), rows)]
    lines += [
        "",
        "## Exit codes of `vllm-patchkit`",
        "",
        "```text",
        EXIT_CODES_HELP.rstrip(),
        "```",
    ]
    for command in commands:
        lines += [
            "",
            f"## `{command.invocation}` {{#{_anchor(command.invocation)}}}",
            "",
        ]
        lines += ["```text", _usage(command.parser), "```", ""]
        description = (command.parser.description or "").strip()
        if description:
            lines += [" ".join(description.split()), ""]
        lines += _options_table(command)
        epilog = (command.parser.epilog or "").strip()
        if epilog and epilog != EXIT_CODES_HELP.strip():
            lines += ["", "```text", epilog, "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m vllm_patchkit.cli_reference",
        description="Write (or, with --check, compare) docs/reference/cli.md.",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when the page differs from the parsers; write nothing",
    )
    parser.add_argument(
        "--output", type=Path, default=PAGE, help="the page (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    commands = all_commands()
    missing = undocumented(commands)
    if missing:
        print("no help text: " + "; ".join(missing), file=sys.stderr)
        return 1
    text = render(commands)
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale: run {parser.prog}", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
