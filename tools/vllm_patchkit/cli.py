"""``vllm-patchkit``: the command line over the vllm_patchkit library.

Exit codes: 0 success; 1 the job ran and its result is bad (bug not fixed);
2 bad input or refused (nothing was changed); 3 an internal or environment
error (git missing, package index unreachable).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from vllm_patchkit import demo
from vllm_patchkit.gitcmd import GitError, GitMissingError
from vllm_patchkit.index import PackageIndexError
from vllm_patchkit.paths import PATCHES_DIR, cache_dir
from vllm_patchkit.series import SeriesError, load_series

EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_ERROR = 0, 1, 2, 3


def _demo(args: argparse.Namespace) -> int:
    series = load_series(args.patches)
    if args.path is None:
        workdir = args.workdir or cache_dir() / "demo"
        result = demo.run_release_demo(series, workdir, args.release)
    else:
        result = demo.run_checkout_demo(series, args.path, args.branch)
    if args.json:
        payload = {
            "ok": result.ok,
            "tree": str(result.tree),
            "branch": result.branch,
            "apply": asdict(result.apply),
            "before": result.before.report,
            "after": result.after.report if result.after else None,
        }
        json.dump(payload, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        print(demo.summary(result))
    return EXIT_OK if result.ok else EXIT_FAILED


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vllm-patchkit",
        description="Keep the vllm-overlay patch series (vLLM PR #51585) applied "
        "to vLLM trees, and prove it with real vLLM code.",
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--patches",
        type=Path,
        default=PATCHES_DIR,
        metavar="DIR",
        help="the patch series directory (default: %(default)s)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo_parser = commands.add_parser(
        "demo",
        help="reproduce the crash, apply the series, show it fixed",
        description=(
            "Run the capture-crash scenarios on real vLLM code, apply the patch "
            "series, and run them again. With no PATH: a clone of the cached "
            f"vLLM {demo.DEFAULT_VERSION} release tree (downloaded once from the "
            "package index pip is configured with). With PATH: your vLLM git "
            "checkout, which must be clean; the patched tree is left on a new "
            "branch and your branch and files are not touched."
        ),
    )
    demo_parser.add_argument("path", nargs="?", type=Path, help="a vLLM git checkout")
    demo_parser.add_argument(
        "--release",
        default=demo.DEFAULT_VERSION,
        help="release to use when no PATH is given (default: %(default)s)",
    )
    demo_parser.add_argument(
        "--workdir", type=Path, help="where the release clone goes (default: the cache)"
    )
    demo_parser.add_argument(
        "--branch",
        default=demo.DEFAULT_BRANCH,
        help="branch that keeps the patched tree of PATH (default: %(default)s)",
    )
    demo_parser.add_argument(
        "--json", action="store_true", help="print one JSON object"
    )
    demo_parser.set_defaults(handler=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except (demo.DemoInputError, SeriesError, ValueError, FileExistsError) as exc:
        print(f"vllm-patchkit: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except (GitMissingError, GitError, PackageIndexError, OSError) as exc:
        print(f"vllm-patchkit: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
