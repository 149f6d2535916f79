"""``vllm-patchkit audit``: find builders that write shared per-step metadata."""

from __future__ import annotations

import argparse
from pathlib import Path

from vllm_patchkit.commands.common import add_command, add_json, emit
from vllm_patchkit.trees.runtime import INSTALLED_VLLM, require

_DESCRIPTION = (
    "Find the class of bug the series' fixes belong to in a vLLM tree or "
    "(with no PATH) the installed vLLM: a metadata builder that writes, in place, a "
    "field of the CommonAttentionMetadata the model runner shares with every "
    "KV-cache group's builder. A static pass reads every module (ast, no "
    "import); a dynamic pass runs every builder it can make on CPU in a "
    "child process, in both modes, records each write with its file and "
    "line, and builds the builders that follow with and without it. Each "
    "finding is harmful (a later builder's output or success changes), "
    "latent (no runnable victim affected, or not exercised) or intentional "
    "(a documented band-aid). Exit 1 when a harmful finding exists; 3 when "
    "it cannot judge (a pass or a finding's effect check could not run, "
    "and nothing harmful was found); 0 otherwise."
)


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "audit",
        help="find metadata builders that write shared state (the fixes' class)",
        description=_DESCRIPTION,
    )
    parser.add_argument(
        "path", nargs="?", type=Path, help="a vLLM tree (default: the installed vLLM)"
    )
    parser.add_argument(
        "--static-only",
        action="store_true",
        help="read the source only; every write's effect is then not judged",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=1200,
        metavar="SECONDS",
        help="limit for the dynamic pass's child process (default: %(default)s)",
    )
    add_json(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from vllm_patchkit.errors import RefusedError

    installed = args.path is None
    if installed:
        hint = "or name a vLLM tree: audit PATH"
        require("audit", INSTALLED_VLLM, hint)
        from vllm_patchkit.trees.installed import installed_vllm_dir

        tree = installed_vllm_dir().parent
    else:
        tree = args.path.resolve()
        if not (tree / "vllm").is_dir():
            raise RefusedError(f"{args.path} is not a vLLM tree (no vllm/ in it)")
    from vllm_patchkit.judge.audit import audit_tree
    from vllm_patchkit.present.reports import format_audit

    report = audit_tree(
        tree,
        dynamic=not args.static_only,
        installed=installed,
        timeout=args.timeout,
    )
    emit(args, report.to_json(), lambda: format_audit(report))
    return report.exit_code
