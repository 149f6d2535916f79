"""``vllm-patchkit upstream``: a local upstream repo from released vLLM sources."""

from __future__ import annotations

import argparse
from pathlib import Path

from vllm_patchkit.commands.common import add_command, add_json, emit
from vllm_patchkit.errors import EXIT_OK

DEFAULT_VERSIONS = "0.12.0,0.20.0,0.28.0,0.29.0"


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "upstream",
        help="build a git upstream from released vLLM sources (offline rebases)",
        description=(
            "Download the source releases of the given vLLM versions through the "
            "package index pip is configured with (cached), and build a bare git "
            "repository with one commit per release, in the order given, tagged "
            "v<version>. Use it with `rebase --upstream`."
        ),
    )
    parser.add_argument(
        "--versions",
        default=DEFAULT_VERSIONS,
        help="comma-separated releases, oldest first (default: %(default)s)",
    )
    parser.add_argument(
        "--dest", type=Path, help="where to build it (default: the cache)"
    )
    add_json(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from vllm_patchkit.git.upstream import build_upstream

    versions = [v.strip() for v in args.versions.split(",") if v.strip()]
    path = build_upstream(versions, args.dest)
    tags = [f"v{v}" for v in versions]
    emit(args, {"path": path, "tags": tags}, lambda: f"{path}: tags {' '.join(tags)}")
    return EXIT_OK
