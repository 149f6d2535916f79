"""``vllm-patchkit rebase``: replay the series onto a newer upstream."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from vllm_patchkit.commands.common import (
    add_command,
    add_json,
    add_path,
    emit,
    outcome,
)
from vllm_patchkit.errors import EXIT_BY_STATUS


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "rebase",
        help=(
            "replay the branch (the series and your own commits) onto REF; the "
            "branch moves only if all of it applies"
        ),
        description=(
            "Replay every commit between the series base (recorded by apply and "
            "rebase, or --base) and HEAD onto REF, in order, in a temporary "
            "worktree: the series' commits and your own commits on top of them. "
            "A series patch is dropped when upstream carries it (its commit in "
            "upstream's history or its invariant holding there), and left out "
            "of the branch (not-carried, kept in the series) when REF is a "
            "release outside its Affects: range, unless you edited its commit; a "
            "patch's invariant must hold after it applies; a commit of yours is kept, "
            "unless REF already has its change (then it is reported as dropped). "
            "A conflict stops the run with a report naming the patch or commit, "
            "the files and the conflicting hunks, and the branch is left as it "
            "was. The checked-out branch is reset to the result only when every "
            "commit went through. Refused (exit 2, nothing changed): no base "
            "below HEAD, a merge commit after the base, or an --onto, --upstream "
            "or --base value that git could read as an option or a refspec."
        ),
    )
    parser.add_argument(
        "--onto",
        required=True,
        metavar="REF",
        help="target commit; with --upstream a branch, tag or commit id there",
    )
    parser.add_argument(
        "--upstream",
        metavar="URL|PATH",
        help="fetch REF from this repository first (e.g. a release upstream)",
    )
    parser.add_argument(
        "--base",
        metavar="REV",
        help="the upstream commit below the series (default: the one recorded "
        "by apply and rebase, refs/vllm-patchkit/base)",
    )
    parser.add_argument(
        "--ci",
        action="store_true",
        help="also write a Markdown summary to $GITHUB_STEP_SUMMARY (or --summary)",
    )
    parser.add_argument("--summary", type=Path, help="Markdown summary file")
    add_path(parser)
    add_json(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from vllm_patchkit.git.rebase import rebase_series
    from vllm_patchkit.git.series import load_series
    from vllm_patchkit.present.rebase_summary import markdown_summary

    result = rebase_series(
        args.path, load_series(args.patches), args.onto, args.upstream, args.base
    )
    summary_file = args.summary or (
        Path(os.environ["GITHUB_STEP_SUMMARY"])
        if args.ci and os.environ.get("GITHUB_STEP_SUMMARY")
        else None
    )
    if args.ci or args.summary:
        text = markdown_summary(result, args.onto)
        if summary_file is not None:
            with summary_file.open("a") as out:
                out.write(text)
        elif not args.json:
            print(text)
    emit(args, result, lambda: outcome(result, result.patches + result.commits))
    return EXIT_BY_STATUS[result.status]
