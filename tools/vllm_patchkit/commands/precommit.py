"""``vllm-patchkit precommit``: vLLM's own pre-commit hooks, offline."""

from __future__ import annotations

import argparse

from vllm_patchkit.commands import lazy_help
from vllm_patchkit.commands.common import (
    add_command,
    add_json,
    add_path,
    emit,
)
from vllm_patchkit.errors import EXIT_FAILED, EXIT_OK

DESCRIPTION = """\
Run the checkout's own .pre-commit-config.yaml on the files the patch series
touches (those that exist in PATH), and report every hook: passed, failed or
skipped, and why.

What is mirrored, and why: vLLM's config takes most hooks from remote git
repositories, which pre-commit clones at run time; an offline machine cannot.
Each known remote hook repository is replaced, at the revision the config
pins, by a local hook running the same tool at the same version, installed
from the package index pip (or npm) is configured with:
{mirrors}
A rev pinned to a commit (pre-commit autoupdate --freeze) is the release its
"# frozen: vX" comment names; a hook that would run at a commit no release is
named for cannot run (exit 3; --skip leaves it out).
The upstream hook definitions (entry, file types, default args) are kept, and
the config's own per-hook settings (args, files, exclude, types, stages,
name, ...) win over them, as pre-commit does. Remote repositories without a
mirror are skipped and reported; local and meta hooks run as configured.
Hooks that a commit would not run (stages without pre-commit) or that match
none of the files are reported skipped and their environments not installed.

The derived config is written under the vllm-overlay cache, never into the
checkout. pre-commit runs in a throwaway clone of PATH (HEAD plus its
uncommitted and untracked files): hooks that fix files in place (ruff format,
clang-format) or write caches change nothing in PATH; a fix counts as a
failure and its diff is shown. --online runs the checkout's config unchanged
(pre-commit then clones the remote repositories).
"""

EXIT_HELP = """\
exit codes:
  0  every hook passed or was skipped
  1  a hook failed (its output, and the diff of any fix, are in the report)
  2  refused or bad input: not the top of a git checkout, no commit, no
     .pre-commit-config.yaml, none of the series' files in PATH, a config
     pre-commit rejects; nothing was run
  3  environment error: a hook's install from the package index failed (the
     package and hook are named), a hook to run is pinned to a commit with no
     release named, git missing
"""


def _describe(parser: argparse.ArgumentParser) -> None:
    from vllm_patchkit.precommit.mirrors import MIRRORS

    mirrors = "\n".join(f"  {slug}" for slug in MIRRORS)
    parser.description = DESCRIPTION.format(mirrors=mirrors)


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "precommit",
        help="run the checkout's pre-commit hooks on the series' files, offline",
        epilog=EXIT_HELP,
        add_help=False,
    )
    lazy_help(parser, _describe)
    add_path(parser)
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="HOOK_ID",
        help="do not run this hook (pre-commit's SKIP); repeatable",
    )
    parser.add_argument(
        "--online",
        action="store_true",
        help="run the checkout's config as it is, without mirroring",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="pass --verbose to pre-commit (every hook's output and duration)",
    )
    add_json(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # PrecommitRefused (2) and PrecommitEnvironmentError (3) take the CLI's
    # one error path.
    from dataclasses import asdict

    from vllm_patchkit.git.series import load_series
    from vllm_patchkit.precommit import run_precommit
    from vllm_patchkit.present.reports import format_precommit

    files = load_series(args.patches).files()
    result = run_precommit(
        args.path, files, online=args.online, skip=args.skip, verbose=args.verbose
    )
    payload = {**asdict(result), "diff": result.diff}
    emit(args, payload, lambda: format_precommit(result))
    return EXIT_OK if result.passed else EXIT_FAILED
