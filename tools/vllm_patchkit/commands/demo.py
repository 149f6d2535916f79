"""``vllm-patchkit demo``: reproduce the crash, apply the series, show it fixed."""

from __future__ import annotations

import argparse
from pathlib import Path

from vllm_patchkit.commands import lazy_help
from vllm_patchkit.commands.common import add_json, emit
from vllm_patchkit.trees.runtime import VLLM_RUNTIME, require


def _describe(parser: argparse.ArgumentParser) -> None:
    from vllm_patchkit.judge import demo

    parser.set_defaults(release=demo.DEFAULT_VERSION, branch=demo.DEFAULT_BRANCH)
    parser.description = (
        "Run the capture-crash scenarios on real vLLM code, apply the patch "
        "series, and run them again. With no PATH: a clone of the cached "
        f"vLLM {demo.DEFAULT_VERSION} release tree (downloaded once from the "
        "package index pip is configured with). With PATH: your vLLM git "
        "checkout, which must be clean; the patched tree is left on a new "
        "branch and your branch and files are not touched. Exit 0 fixed, "
        "1 not fixed, 3 cannot judge (a core check could not run)."
    )


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "demo",
        help="reproduce the crash, apply the series, show it fixed",
        add_help=False,
    )
    lazy_help(parser, _describe)
    parser.add_argument("path", nargs="?", type=Path, help="a vLLM git checkout")
    parser.add_argument(
        "--release",
        help="release to use when no PATH is given (default: %(default)s)",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        help=(
            "where the release clone goes: a new or empty directory, or one "
            "the demo made (default: the cache)"
        ),
    )
    parser.add_argument(
        "--branch",
        help="branch that keeps the patched tree of PATH (default: %(default)s)",
    )
    add_json(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    require("demo", VLLM_RUNTIME)
    from vllm_patchkit.git.series import load_series
    from vllm_patchkit.judge import demo
    from vllm_patchkit.present.reports import format_demo

    series = load_series(args.patches)
    if args.path is None:
        release = args.release or demo.DEFAULT_VERSION
        result = demo.run_release_demo(series, args.workdir, release)
    else:
        branch = args.branch or demo.DEFAULT_BRANCH
        result = demo.run_checkout_demo(series, args.path, branch)
    judgement = result.judgement
    payload = {
        "ok": judgement.fixed,
        "verdict": judgement.verdict,
        "why": judgement.why,
        "tree": result.tree,
        "branch": result.branch,
        "apply": result.apply,
        "before": result.before.report,
        "after": result.after.report if result.after else None,
    }
    emit(args, payload, lambda: format_demo(result))
    return judgement.exit_code
