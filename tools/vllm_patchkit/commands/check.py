"""``vllm-patchkit check``: read-only status of each patch in a checkout.

The states come from :func:`vllm_patchkit.git.checkout.classify`: a scratch
index and object directory, patch after patch, nothing written to the work
tree or under ``.git`` (a read-only repository gives the same answer), none
of the checkout's hooks run.
"""

from __future__ import annotations

import argparse

from vllm_patchkit.commands.common import (
    add_command,
    add_json,
    add_path,
    emit,
    patch_lines,
)
from vllm_patchkit.errors import EXIT_FAILED, EXIT_OK


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "check",
        help="read-only: is each patch applied, upstreamed, carried, applicable?",
        description=(
            "Report, without changing anything (nothing under .git either; it "
            "works on a read-only repository), the state of each patch in the "
            "checkout: applied (in the history), upstreamed (its invariant holds "
            "without it), not-carried (the series does not carry it here: its "
            "code lacks the bug's shape, the target is missing or has the shape "
            "of a release the patch is not for; where the code cannot be read, "
            "the release is outside the patch's Affects: range; the reason is "
            "printed, and says so when the code contradicts the version), "
            "applies (would "
            "apply on top of the patches before it) or conflict (would not "
            "apply, or its invariant would not hold once applied: checked on a "
            "trial tree, as apply checks it after git am). Exit 1 when a patch "
            "would conflict; not-carried is not a failure."
        ),
    )
    add_path(parser)
    add_json(parser)
    # A pre-commit hook's run, a fraction of a second: no garbage collection
    # (cli._without_collection) when the process ends with it.
    parser.set_defaults(handler=run, collect_garbage=False)


def run(args: argparse.Namespace) -> int:
    from vllm_patchkit.git.checkout import PatchState, classify, open_checkout
    from vllm_patchkit.git.series import load_series

    reports = classify(open_checkout(args.path), load_series(args.patches))
    conflict = any(r.status == PatchState.CONFLICT for r in reports)
    payload = {"path": args.path.resolve(), "patches": reports}
    emit(args, payload, lambda: "\n".join(patch_lines(reports)))
    return EXIT_FAILED if conflict else EXIT_OK
