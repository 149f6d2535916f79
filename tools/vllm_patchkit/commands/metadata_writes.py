"""``vllm-patchkit metadata-writes``: the audit's static pass as a pre-commit hook."""

from __future__ import annotations

import argparse
from pathlib import Path

from vllm_patchkit.commands.common import add_command, add_json, emit_json

_DESCRIPTION = (
    "The audit's static pass on the files a change touches, for pre-commit "
    "(hook id vllm-metadata-writes, .pre-commit-hooks.yaml): the metadata "
    "builders FILE... define, build on or hand out are read with ast, never "
    "imported, in about a second. One line per finding, 'file:line: kind: "
    "what', harmful first. A write only reading can see is latent (`audit` "
    "measures its effect); a documented band-aid is intentional for the "
    "backend it was made for and harmful where another backend runs it and "
    "reads what it wrote. Files outside ROOT or not Python are skipped. Modules "
    "are read as Python reads them (encoding declaration, BOM); one under "
    "ROOT/vllm that cannot be (past 2 MB, not a regular file, not Python text, "
    "not parsable) is named 'not read'. Exit 1 on a harmful finding; 3 when a "
    "module was not read or ROOT has no CommonAttentionMetadata to judge by; "
    "0 otherwise."
)


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "metadata-writes",
        help="pre-commit hook: shared metadata writes in the changed files",
        description=_DESCRIPTION,
    )
    parser.add_argument(
        "files", nargs="*", type=Path, metavar="FILE", help="changed files"
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=Path("."),
        help="the vLLM tree the files belong to (default: the current directory)",
    )
    add_json(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from vllm_patchkit.errors import RefusedError

    root = args.root.resolve()
    if not (root / "vllm").is_dir():
        raise RefusedError(f"{args.root} is not a vLLM tree (no vllm/ in it)")
    files = []
    for file in args.files:
        try:
            relative = file.resolve().relative_to(root).as_posix()
        except ValueError:
            continue
        if relative.endswith(".py"):
            files.append(relative)
    from vllm_patchkit.judge.audit.files import FilesReport, judge_files

    report = judge_files(root, files) if files else FilesReport([], [], None)
    if args.json:
        emit_json(report.to_json())
        return report.exit_code
    for line in report.lines():
        print(line)
    if report.exit_code and not report.harmful:
        why = (
            f"{len(report.not_read)} module(s) under {root / 'vllm'} not read"
            if report.not_read
            else f"no CommonAttentionMetadata under {root / 'vllm'}"
        )
        print(f"cannot judge: {why}")
    return report.exit_code
