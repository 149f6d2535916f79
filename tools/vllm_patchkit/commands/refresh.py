"""``vllm-patchkit refresh``: regenerate patches/ from the checkout's commits."""

from __future__ import annotations

import argparse

from vllm_patchkit.commands.common import add_command, add_json, add_path, emit_json
from vllm_patchkit.errors import EXIT_OK
from vllm_patchkit.paths import writable_series


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "refresh",
        help="regenerate the patch files from the series commits (idempotent)",
        description=(
            "Export the commits between the series base (recorded by apply and "
            "rebase, or --base) and HEAD into the patches directory with stable "
            "git format-patch options, and rewrite the series file. Running it "
            "twice gives byte-identical files. A patch with no commit here "
            "(upstream carries it on this release, or the series does not carry "
            "it for this release) keeps its file and series line as they are: "
            "older releases in its Affects: range need it; it leaves only when "
            "its whole range is upstream. On the newest release the tags name, "
            "each patch's Affects: and Applied-Upstream: trailers follow the "
            "base's code: a range still buggy there opens (0.14.0..), one fixed "
            "there closes at the release before, with Applied-Upstream: added "
            "(--json: ranges)."
        ),
    )
    parser.add_argument(
        "--base", metavar="REF", help="the upstream commit below the series"
    )
    add_path(parser)
    add_json(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from vllm_patchkit.git.refresh import refresh_series

    result = refresh_series(args.path, writable_series(args.patches), args.base)
    if args.json:
        emit_json(result)
    else:
        print(
            f"base {result.base[:12]}: wrote {len(result.written)} patch(es), "
            f"{len(result.changed)} changed, {len(result.removed)} removed"
        )
        for name in result.changed:
            print(f"  changed {name}")
        for name in result.removed:
            print(f"  removed {name}")
        for name in result.kept:
            print(f"  kept {name} (no commit here; {result.why_kept[name]})")
        for judged in result.ranges.changes:
            recorded = f"Affects: {judged.affects} -> {judged.new_affects}"
            if judged.applied_upstream:
                recorded += f", Applied-Upstream: {judged.applied_upstream}"
            print(f"  range {judged.name}: {recorded} ({judged.why})")
    return EXIT_OK
