"""``vllm-patchkit matrix``: the bug and the fix across vLLM releases."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vllm_patchkit.commands.common import EXIT_CODES_HELP, EXIT_OK, add_json, emit_json
from vllm_patchkit.errors import InputError
from vllm_patchkit.runtime import VLLM_RUNTIME, require

TYPE_CHECKING = False  # typing costs every start-up; annotations only
if TYPE_CHECKING:
    from vllm_patchkit.matrix import Row


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "matrix",
        help="affected? series applies? overlay? suite? for every release",
        description=(
            "For every vLLM source release on the package index in the range: "
            "whether it is affected, whether the series applies or is upstreamed, "
            "what the overlay would do, and, for releases that pin this venv's "
            "torch, the regression suite against a real install, with the "
            "counts of checks that ran and could not run (named, with the "
            "reason, under the table). Cached per release under a key of "
            "every source file and version that decides a row: a second run "
            "reads the cache. Writes matrix.md and matrix.json."
        ),
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--from", dest="first", default="0.11.0", metavar="VERSION")
    parser.add_argument("--to", dest="last", default="latest", metavar="VERSION")
    parser.add_argument(
        "--no-suite", action="store_true", help="skip the real-install regression runs"
    )
    parser.add_argument(
        "--refresh", action="store_true", help="recompute cached releases too"
    )
    parser.add_argument(
        "--output-dir", type=Path, default=Path("."), help="where matrix.md/json go"
    )
    add_json(parser)
    parser.set_defaults(handler=run)


class MatrixRangeError(InputError):
    """--from/--to name no release range (refused before the index is asked
    when the versions themselves are malformed or reversed)."""


def _version(text: str, option: str) -> tuple[int, ...]:
    parts = text.split(".")
    if not all(part.isascii() and part.isdigit() for part in parts):
        raise MatrixRangeError(
            f"{option} {text!r} is not a vLLM release version such as 0.28.0"
        )
    return tuple(int(part) for part in parts)


def check_range(first: str, last: str) -> None:
    """Refuse a malformed or reversed --from/--to before anything runs."""
    low = _version(first, "--from")
    if last != "latest" and _version(last, "--to") < low:
        raise MatrixRangeError(f"--to {last} comes before --from {first}")


def _progress(index: int, total: int, row: Row) -> None:
    width = len(str(total))
    print(
        f"[{index:>{width}}/{total}] vLLM {row.version:<8} "
        f"{'AFFECTED' if row.affected else 'ok      '} series: {row.series:<10} "
        f"overlay: {row.overlay:<12} suite: {row.suite}"
        + (" (cached)" if row.cached else ""),
        file=sys.stderr,
    )


def run(args: argparse.Namespace) -> int:
    check_range(args.first, args.last)
    hint = "--no-suite skips the suite"
    if not args.no_suite and (code := require(args, "matrix", VLLM_RUNTIME, hint)):
        return code
    import json
    import time
    from dataclasses import asdict

    from vllm_patchkit.matrix import build_matrix, markdown, select_versions
    from vllm_patchkit.series import load_series

    try:
        versions = select_versions(args.first, args.last)
    except ValueError as exc:  # the range selects no release on the index
        raise MatrixRangeError(str(exc)) from None
    start = time.perf_counter()
    rows = build_matrix(
        load_series(args.patches),
        versions,
        with_suite=not args.no_suite,
        progress=_progress,
        refresh=args.refresh,
    )
    seconds = time.perf_counter() - start
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "matrix.md").write_text(markdown(rows))
    payload = {"seconds": seconds, "rows": [asdict(r) for r in rows]}
    (args.output_dir / "matrix.json").write_text(json.dumps(payload, indent=2) + "\n")
    if args.json:
        emit_json(payload)
    else:
        print(markdown(rows), end="")
        print(f"{len(rows)} releases in {seconds:.1f} s", file=sys.stderr)
    return EXIT_OK
