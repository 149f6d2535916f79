"""``vllm-patchkit rebase``: replay the series onto a newer upstream."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from vllm_patchkit.commands.common import (
    EXIT_CODES_HELP,
    EXIT_CONFLICT,
    EXIT_OK,
    EXIT_REFUSED,
    add_json,
    add_path,
    emit_json,
    patch_lines,
)

EXIT_BY_STATUS = {
    "rebased": EXIT_OK,
    "conflict": EXIT_CONFLICT,
    "refused": EXIT_REFUSED,
}


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "rebase",
        help="replay the series onto REF; the branch moves only if all of it applies",
        description=(
            "Replay the series onto REF in a temporary worktree: each patch "
            "applies (git am -3 plus its invariant), is dropped because upstream "
            "carries it, or stops the run with a report naming the patch, the "
            "files and the conflicting hunks. The checked-out branch is reset to "
            "the result only when the whole series went through."
        ),
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--onto", required=True, metavar="REF", help="target commit")
    parser.add_argument(
        "--upstream",
        metavar="URL|PATH",
        help="fetch REF from this repository first (e.g. a release upstream)",
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
    from vllm_patchkit.rebase import markdown_summary, rebase_series
    from vllm_patchkit.series import load_series

    result = rebase_series(
        args.path, load_series(args.patches), args.onto, args.upstream
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
    if args.json:
        emit_json(result)
    else:
        for note in result.notes:
            print(f"note: {note}")
        print(f"{result.status}: {result.message}")
        print("\n".join(patch_lines(result.patches)))
    return EXIT_BY_STATUS.get(result.status, EXIT_REFUSED)
