"""``vllm-patchkit test``: run the regression suite against a vLLM tree."""

from __future__ import annotations

import argparse

from vllm_patchkit.commands.common import add_command, add_json, add_path, emit
from vllm_patchkit.errors import InputError
from vllm_patchkit.trees.runtime import TEST_RUNTIME, require


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "test",
        help="run the regression suite against the vLLM source at PATH",
        description=(
            "Import vLLM from PATH (a checkout or a release tree) with this "
            "venv's dependencies, on CPU, and run the regression suite: each "
            "fix's scenarios on the tree's real code. The series' upstream "
            "tests (the test files its patches add) run too when the tree has "
            "them, with the tree's tests/ helpers. When "
            "PATH is a checkout with a recorded base (apply, rebase) or "
            "--baseline, the base is run as well for a before/after table. "
            "The report counts the checks that ran, passed and failed, and "
            "names each one that could not run, with the reason. Each fix of "
            "the registry (the README's table of fixes) is judged and "
            "reported separately, one line per fix. The "
            "exit code is over the fixes the series expects on the tree's "
            "release: those whose patch the series carries for it (by its "
            "code, else Affects:; every fix on an unknown or development "
            "version) or that upstream carries there. A fix the series "
            "does not carry there still runs, but its "
            "checks are counted apart ('not carried here: N checks, not "
            "counted'), never as failures, and decide nothing. Exit 0 if "
            "and only if every expected fix is present and behaves correctly; "
            "1 if one is not; 3 (cannot judge) when nothing failed but a core "
            "check of an expected fix or the upstream test could not run."
        ),
    )
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="commit to run as 'before' (default: the base recorded by apply)",
    )
    parser.add_argument(
        "--no-baseline",
        action="store_true",
        help="judge PATH alone, without the 'before' run",
    )
    add_path(parser, "a vLLM checkout or source tree")
    add_json(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.baseline and args.no_baseline:
        raise InputError("--baseline and --no-baseline contradict each other")
    require("test", TEST_RUNTIME)
    from vllm_patchkit.git.series import load_series
    from vllm_patchkit.judge.verify import verify_tree
    from vllm_patchkit.present.reports import format_verify

    result = verify_tree(
        args.path,
        load_series(args.patches),
        args.baseline,
        compare=not args.no_baseline,
    )
    emit(args, result, lambda: format_verify(result))
    return result.verdict.exit_code
