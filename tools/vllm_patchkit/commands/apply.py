"""``vllm-patchkit apply``: the series as commits on the checked-out branch."""

from __future__ import annotations

import argparse

from vllm_patchkit.commands.common import (
    EXIT_CODES_HELP,
    EXIT_CONFLICT,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UPSTREAMED,
    add_json,
    add_path,
    emit_json,
    patch_lines,
)


def exit_by_status() -> dict[object, int]:
    """Exit code per apply.Status (built on use: the library loads in run())."""
    from vllm_patchkit.apply import Status

    return {
        Status.APPLIED: EXIT_OK,
        Status.ALREADY_APPLIED: EXIT_OK,
        Status.UPSTREAMED: EXIT_UPSTREAMED,
        Status.NOT_CARRIED: EXIT_OK,
        Status.CONFLICT: EXIT_CONFLICT,
        Status.REFUSED: EXIT_REFUSED,
        Status.ERROR: EXIT_ERROR,
    }


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "apply",
        help="apply the series to a checkout as commits (git am -3), all or nothing",
        description=(
            "Apply every patch of the series to the checked-out branch with "
            "`git am -3`, then check each patch's invariant (this catches a hunk "
            "that landed in the wrong place). On any failure the checkout is put "
            "back exactly as it was. A dirty checkout, a detached HEAD or a "
            "checkout another run is working on is refused. Patches already in "
            "the history are skipped, and so are patches the series does not "
            "carry for the checkout's release (their Affects: trailer names "
            "other releases; listed as not-carried). If upstream already "
            "carries every patch the series carries for this release, nothing "
            "changes and the exit code is 5; if the series carries no patch "
            "for this release, nothing changes, status not-carried, exit 0. A "
            "checkout of an unknown or development version (upstream main) is "
            "never not-carried: every patch is tried. A hook, the disk or permissions "
            "failing an apply is exit 3, after the rollback. JSON status: "
            "applied, already-applied, upstreamed, not-carried, conflict, "
            "refused, error, "
            "interrupted. A run that was killed leaves a journal in "
            ".git/vllm-patchkit/; the next run acts on it only when the checkout "
            "is as that run could have left it, and refuses otherwise."
        ),
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_path(parser)
    add_json(parser)
    journal = parser.add_mutually_exclusive_group()
    journal.add_argument(
        "--recover",
        dest="journal_action",
        action="store_const",
        const="recover",  # guard.JournalAction values; run() converts
        default="auto",
        help="a killed run's journal: put the checkout back where that run "
        "started even though it changed since; what is there now is saved "
        "first (uncommitted changes in `git stash`, other commits under "
        "refs/vllm-patchkit/saved/)",
    )
    journal.add_argument(
        "--discard-journal",
        dest="journal_action",
        action="store_const",
        const="discard",
        help="a killed run's journal: delete it and keep the checkout as it is",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from vllm_patchkit.apply import apply_series
    from vllm_patchkit.guard import JournalAction
    from vllm_patchkit.series import load_series

    journal = JournalAction(args.journal_action)
    result = apply_series(args.path, load_series(args.patches), journal)
    if args.json:
        emit_json(result)
    else:
        for note in result.notes:
            print(f"note: {note}")
        print(f"{result.status}: {result.message}")
        print("\n".join(patch_lines(result.patches)))
    return exit_by_status()[result.status]
