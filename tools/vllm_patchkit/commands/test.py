"""``vllm-patchkit test``: run the regression suite against a vLLM tree."""

from __future__ import annotations

import argparse

from vllm_patchkit.commands.common import (
    EXIT_CODES_HELP,
    EXIT_ERROR,
    EXIT_FAILED,
    EXIT_OK,
    add_json,
    add_path,
    emit_json,
)
from vllm_patchkit.series import load_series
from vllm_patchkit.verify import TreeRun, VerifyResult, verify_tree

CELL_WIDTH = 64
EXIT_BY_VERDICT = {"fixed": EXIT_OK, "not-fixed": EXIT_FAILED, "error": EXIT_ERROR}


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "test",
        help="run the regression suite against the vLLM source at PATH",
        description=(
            "Import vLLM from PATH (a checkout or a release tree) with this "
            "venv's dependencies, on CPU, and run the regression suite: ROCm "
            "capture effects, the MiniMax-M3 start-up crash, the builders that "
            "run after the ROCm one, vLLM's own capture loops. The series' "
            "upstream test (patch 0002) runs too when the tree has it. When "
            "PATH is a checkout with a recorded base (apply, rebase) or "
            "--baseline, the base is run as well for a before/after table. "
            "Exit 0 if and only if the fix is present and behaves correctly."
        ),
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="commit to run as 'before' (default: the base recorded by apply)",
    )
    parser.add_argument(
        "--no-baseline",
        action="store_true",
        help="judge PATH alone, without the 'before' run",
    )
    add_path(parser, "a vLLM checkout or source tree")
    add_json(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.baseline and args.no_baseline:
        raise ValueError("--baseline and --no-baseline contradict each other")
    result = verify_tree(
        args.path,
        load_series(args.patches),
        args.baseline,
        compare=not args.no_baseline,
    )
    if args.json:
        emit_json(result)
    else:
        print(format_result(result))
    return EXIT_BY_VERDICT[result.verdict]


def format_result(result: VerifyResult) -> str:
    """A before/after table: one row per check, then the upstream test."""
    runs = [r for r in (result.before, result.after) if r is not None]
    header = [r.label for r in runs]
    rows: list[list[str]] = []
    names = [c["name"] for r in runs for c in r.checks]
    for name in dict.fromkeys(names):
        rows.append([name, *(_cell(r, name) for r in runs)])
    if result.test_files:
        rows.append(["upstream test", *(_test_cell(r) for r in runs)])
    lines = [f"vLLM {_version(runs)} from {result.after.tree}"]
    lines += [f"  {r.label}: {r.revision}" for r in runs if r.revision]
    lines += _table(["check", *header], rows)
    for run in runs:
        if run.problem:
            lines.append(f"{run.label}: cannot judge: {run.problem}")
        test = run.upstream_test
        for failure in test.failures[:4] if test else []:
            lines.append(f"{run.label}: {failure}")
    lines.append(f"verdict: {result.verdict.upper()}: {result.message}")
    return "\n".join(lines)


def _version(runs: list[TreeRun]) -> str:
    return next((r.vllm_version for r in reversed(runs) if r.vllm_version), "?")


def _cell(run: TreeRun, name: str) -> str:
    for check in run.checks:
        if check["name"] == name:
            if check["passed"]:
                return "PASS"
            return f"FAIL {check['detail']}"[:CELL_WIDTH]
    return "-"


def _test_cell(run: TreeRun) -> str:
    if run.upstream_test is None:
        return "-"
    verdict = "PASS" if run.upstream_test.ok else "FAIL"
    return f"{verdict} {run.upstream_test.summary}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(
            cell.ljust(width) for cell, width in zip(row, widths, strict=True)
        ).rstrip()
        for row in [header, *rows]
    ]
