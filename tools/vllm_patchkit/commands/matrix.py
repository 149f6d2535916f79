"""``vllm-patchkit matrix``: the bug and the fix across vLLM releases."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from vllm_patchkit.commands.common import add_command, add_json, emit, emit_json
from vllm_patchkit.errors import EXIT_OK, InputError
from vllm_patchkit.judgement import Verdict
from vllm_patchkit.progress import Sweep
from vllm_patchkit.trees.runtime import VLLM_RUNTIME, require

ROW_FILE = "matrix-rows.json"
"""What a sharded run (--releases, --shard) writes in --output-dir."""

TYPE_CHECKING = False  # the matrix library loads only when the command runs
if TYPE_CHECKING:
    from vllm_overlay.releases import Release
    from vllm_patchkit.judge.matrix import Row


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "matrix",
        help="stock suite, series applied, overlay, audit: every release measured",
        description=(
            "For every vLLM source release on the package index in the range, "
            "on the release's own source tree with this venv's torch and the "
            "release's missing pure-Python requirements beside it: the "
            "regression suite on the stock tree (bug reproduced or not), the "
            "suite with the series applied to a scratch clone (the stock run "
            "is reused where the series changes nothing the suite imports, "
            "and the cell says so), the overlay through vLLM's own plugin "
            "loading, and the audit's harmful findings, each with the seconds "
            "it took and the counts it rests on. A release that cannot run "
            "says why. Every step is cached per release commit under a key of "
            "every source file and version that decides it: a second run "
            "reads the cache. Progress lines go to stderr. Writes matrix.md "
            "and matrix.json; exits 3 when a measured cell could not be "
            "judged (cannot judge, cannot run), naming those cells. A cell the "
            "environment may have decided (an error, a run that gave no "
            "report) is never cached. To spread the releases over machines "
            "(one GitHub Actions job each: docs/matrix-sharding.md), run "
            "subsets with --releases or --shard and put their row files "
            "together with --merge: the same table, byte for byte."
        ),
    )
    parser.add_argument(
        "--from",
        dest="first",
        default="0.11.0",
        metavar="VERSION",
        help="the oldest source release to measure (default: %(default)s)",
    )
    parser.add_argument(
        "--to",
        dest="last",
        default="latest",
        metavar="VERSION",
        help="the newest one (default: the newest on the package index)",
    )
    parser.add_argument(
        "--no-suite",
        action="store_true",
        help="read the trees only: skip the suite, overlay and audit runs",
    )
    parser.add_argument(
        "--steps",
        metavar="LIST",
        help=(
            "comma-separated measured steps to run (stock, series, overlay, "
            "audit; default all); the others are marked skipped"
        ),
    )
    parser.add_argument(
        "--refresh", action="store_true", help="recompute cached releases too"
    )
    parser.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=1,
        metavar="N",
        help="releases judged at once (default 1)",
    )
    parser.add_argument(
        "--output-dir", type=Path, default=Path("."), help="where matrix.md/json go"
    )
    parser.add_argument(
        "--readme",
        type=Path,
        metavar="PATH",
        help="also replace the table between PATH's matrix markers",
    )
    subset = parser.add_mutually_exclusive_group()
    subset.add_argument(
        "--releases",
        metavar="LIST",
        help=(
            "comma-separated releases of the --from/--to range to run (one "
            "GitHub Actions job each, .github/workflows/matrix.yml); writes "
            f"{ROW_FILE} in --output-dir instead of the table, for --merge"
        ),
    )
    subset.add_argument(
        "--shard",
        metavar="K/N",
        help=(
            "run shard K of N of the range: every N-th release from the K-th, "
            "in index order (the same range always gives the same shards); "
            f"writes {ROW_FILE} in --output-dir instead of the table"
        ),
    )
    subset.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        metavar="FILE",
        help=(
            "run nothing: merge the row files of --releases/--shard runs into "
            "matrix.md and matrix.json exactly as one unsharded run writes "
            "them (the range comes from the files). Refused (exit 2) unless "
            "every file ran the same code digest, environment and steps on "
            "the same release list, and each release has exactly one row "
            "(no duplicate, no gap); a file that is not a regular file of at "
            "most 16 MiB, or a field of the wrong type or value (a release, a "
            "fix label, a step), is refused naming the file and the field"
        ),
    )
    parser.add_argument(
        "--onto",
        type=Path,
        metavar="MATRIX_JSON",
        help=(
            "with --merge: the rows of this matrix.json (the committed table, "
            "docs/matrix.json) stand for the releases of the range that no row "
            "file has, so a new release joins the table without a sweep of "
            "every release; matrix.json's run names the rows kept"
        ),
    )
    subset.add_argument(
        "--list",
        action="store_true",
        help=(
            "run nothing: print the releases of the range, one a line (with "
            "--json, a JSON list: the workflow's job matrix)"
        ),
    )
    add_json(parser)
    parser.set_defaults(handler=run)


class MatrixRangeError(InputError):
    """--from/--to name no release range (refused before the index is asked
    when the versions themselves are malformed or reversed)."""


def _version(text: str, option: str) -> Release:
    from vllm_overlay.releases import parse_release

    release = parse_release(text)
    if release is None:
        raise MatrixRangeError(
            f"{option} {text!r} is not a vLLM release version such as 0.28.0"
        )
    return release


def check_range(first: str, last: str) -> None:
    """Refuse a malformed or reversed --from/--to before anything runs."""
    low = _version(first, "--from")
    if last != "latest" and _version(last, "--to") < low:
        raise MatrixRangeError(f"--to {last} comes before --from {first}")


def _steps(args: argparse.Namespace) -> tuple[str, ...]:
    """The measured steps to run: --steps, none for --no-suite, else all."""
    from vllm_patchkit.judge.matrix import MEASURED

    if args.steps is None:
        return () if args.no_suite else MEASURED
    if args.no_suite:
        raise InputError("--steps and --no-suite contradict each other")
    chosen = tuple(s.strip() for s in args.steps.split(",") if s.strip())
    unknown = [s for s in chosen if s not in MEASURED]
    if unknown or not chosen:
        raise InputError(f"--steps {args.steps}: choose among {', '.join(MEASURED)}")
    return chosen


def run(args: argparse.Namespace) -> int:
    if args.merge is not None:
        from vllm_patchkit.present.matrix_shards import merge

        check_readme(args)
        return write_table(args, *merge(args.merge, args.onto))
    if args.onto is not None:
        raise InputError("--onto takes the table the row files of --merge join")
    check_range(args.first, args.last)
    sharded = args.releases is not None or args.shard is not None
    if args.readme is not None and sharded:
        raise InputError("--readme takes the whole table: give it to --merge")
    if args.list:
        from vllm_patchkit.judge.matrix import select_versions

        versions = select_versions(args.first, args.last)
        emit(args, versions, lambda: "\n".join(versions))
        return EXIT_OK
    hint = "--no-suite skips the suite"
    if not args.no_suite and args.steps != "audit":
        require("matrix", VLLM_RUNTIME, hint)
    steps = _steps(args)
    if args.jobs < 1:
        raise InputError(f"--jobs {args.jobs}: at least one release at a time")
    check_readme(args)
    from vllm_patchkit.git.series import load_series
    from vllm_patchkit.judge.matrix import build_matrix, select_versions
    from vllm_patchkit.present import matrix_shards as shards
    from vllm_patchkit.present.matrix_table import summary

    everything = select_versions(args.first, args.last)  # InputError: none there
    versions = everything
    if args.releases is not None:
        versions = shards.pick_releases(everything, args.releases)
    elif args.shard is not None:
        versions = shards.shard_versions(everything, *shards.parse_shard(args.shard))
    series = load_series(args.patches)
    start = time.perf_counter()
    rows = build_matrix(
        series,
        versions,
        steps=steps,
        progress=Sweep(len(versions)),
        refresh=args.refresh,
        jobs=args.jobs,
    )
    run_info = summary(rows, time.perf_counter() - start, args.jobs)
    if not sharded:
        return write_table(args, rows, run_info)
    payload = shards.row_file(rows, run_info, everything, steps, shards.digests(series))
    args.output_dir.mkdir(parents=True, exist_ok=True)
    path = args.output_dir / ROW_FILE
    path.write_text(json.dumps(payload, indent=2) + "\n")
    if args.json:
        emit_json(payload)
    print(
        f"{len(rows)} of {len(everything)} releases in {run_info['seconds']:.1f} s: "
        f"{path} (merge the row files with matrix --merge)",
        file=sys.stderr,
    )
    return _exit(rows)


def check_readme(args: argparse.Namespace) -> None:
    """Refuse a --readme without the table's markers before anything runs."""
    if args.readme is not None:
        from vllm_patchkit.present.matrix_table import with_table

        with_table(args.readme.read_text(), [])


def write_table(args: argparse.Namespace, rows: list[Row], run_info: dict) -> int:
    """matrix.md, matrix.json and the README's table from ``rows``: the one
    tail of an unsharded run and of a merge, so the two write the same bytes."""
    from vllm_patchkit.present.matrix_table import markdown, to_json, with_table

    args.output_dir.mkdir(parents=True, exist_ok=True)
    table = markdown(rows)
    (args.output_dir / "matrix.md").write_text(table)
    payload = to_json(rows, run_info)
    (args.output_dir / "matrix.json").write_text(json.dumps(payload, indent=2) + "\n")
    if args.readme is not None:
        args.readme.write_text(with_table(args.readme.read_text(), rows))
    if args.json:
        emit_json(payload)
    else:
        print(table, end="")
        print(
            f"{len(rows)} releases in {run_info['seconds']:.1f} s",
            file=sys.stderr,
        )
    return _exit(rows)


def _exit(rows: list[Row]) -> int:
    from vllm_patchkit.judge.matrix import unjudged_cells

    unjudged = unjudged_cells(rows)
    if unjudged:
        # The table is written either way; the exit says it is not whole.
        print(
            f"{len(unjudged)} cell(s) could not be judged (each says why): "
            + ", ".join(unjudged),
            file=sys.stderr,
        )
        return Verdict.CANNOT_JUDGE.exit_code
    return EXIT_OK
