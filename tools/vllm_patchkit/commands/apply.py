"""``vllm-patchkit apply``: the series as commits on the checked-out branch."""

from __future__ import annotations

import argparse

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
        "apply",
        help="apply the series to a checkout as commits (git am -3), all or nothing",
        description=(
            "Apply every patch of the series to the checked-out branch with "
            "`git am -3`, then check each patch's invariant (this catches a hunk "
            "that landed in the wrong place). On any failure the checkout is put "
            "back exactly as it was. A dirty checkout, a detached HEAD or a "
            "checkout another run is working on is refused. Patches already in "
            "the history are skipped, and so are patches the series does not "
            "carry for the checkout (listed as not-carried, with the reason). "
            "Whether a patch is carried is read from the code: its fix's "
            "classifier must find the bug's shape (a missing target, or the "
            "shape of a release the patch is not for, is not-carried; the fixed "
            "shape is upstreamed). Where the code contradicts the version (a "
            "fork whose tags name an old release) the code wins and the output "
            "says why; where the code cannot be read, the release's Affects: "
            "range decides, or, with no trustworthy version, the patch is "
            "skipped (docs/forks.md). If upstream already "
            "carries every patch the series carries for this release, nothing "
            "changes and the exit code is 5; if the series carries no patch "
            "for this release, nothing changes, status not-carried, exit 0. "
            "A hook, the disk or permissions "
            "failing an apply is exit 3, after the rollback. JSON status: "
            "applied, already-applied, upstreamed, not-carried, conflict, "
            "refused, error, "
            "interrupted. A run that was killed leaves a journal in "
            ".git/vllm-patchkit/; the next run acts on it only when the checkout "
            "is as that run could have left it, and refuses otherwise."
        ),
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
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="PATCH",
        help="do not apply PATCH (its file name, or a prefix of one such as "
        "0003), whatever the checkout's code or version says; repeatable. It "
        "is reported not-carried, 'skipped by the user (--skip)', and listed "
        "under skipped in --json. For a fork where you know better than the "
        "toolkit's reading of the code",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from vllm_patchkit.git.apply import apply_series
    from vllm_patchkit.git.guard import JournalAction
    from vllm_patchkit.git.series import load_series

    journal = JournalAction(args.journal_action)
    series = load_series(args.patches)
    result = apply_series(args.path, series, journal, series.names(args.skip))
    skipped = ", ".join(result.skipped)
    more = [f"skipped by --skip: {skipped}"] if skipped else []
    emit(args, result, lambda: outcome(result, result.patches, *more))
    return EXIT_BY_STATUS[result.status]
