"""``python -m vllm_patchkit.judge.mutation``: the suite's kill rate on mutants.

Without ``--tree``, the installed vLLM is copied into a git tree and the
series applied to it (what the tests call the patched installed tree).
Exit status: 0 when every mutant is killed, 1 when one survives or a run
proves nothing, 2 when the tree is not fixed to begin with.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

from vllm_patchkit.errors import (
    EXIT_FAILED,
    EXIT_OK,
    EnvironmentFailure,
    PatchkitError,
    RefusedError,
)


def _patched_installed_tree(dest: Path) -> Path:
    from vllm_patchkit.git.apply import Status, apply_series
    from vllm_patchkit.git.series import load_series
    from vllm_patchkit.trees.installed import copy_installed_vllm

    tree = dest / "vllm-tree"
    copy_installed_vllm(tree)
    result = apply_series(tree, load_series())
    if result.status is not Status.APPLIED:
        raise EnvironmentFailure(f"cannot apply the series: {result.message}")
    return tree


def main(argv: list[str] | None = None) -> int:
    from vllm_patchkit.judge.mutation.runner import (
        ALL_MUTANTS,
        MAX_JOBS,
        BaselineFailed,
        format_report,
        run_mutation,
    )

    parser = argparse.ArgumentParser(
        prog="python -m vllm_patchkit.judge.mutation", description=__doc__
    )
    parser.add_argument("--tree", type=Path, help="a fixed vLLM tree (holds vllm/)")
    parser.add_argument(
        "--mutant",
        action="append",
        choices=[m.name for m in ALL_MUTANTS],
        help="run only this mutant (repeatable)",
    )
    parser.add_argument("--jobs", type=int, default=MAX_JOBS, help="at most 2")
    parser.add_argument(
        "--fail-fast",
        action="store_true",
        help="stop each mutant's suite at its first failing check (faster)",
    )
    parser.add_argument(
        "--no-fork",
        action="store_true",
        help="a fresh interpreter per mutant instead of forks of a warm one",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    mutants = [m for m in ALL_MUTANTS if not args.mutant or m.name in args.mutant]
    with tempfile.TemporaryDirectory(prefix="vllm-overlay-mutation-") as tmp:
        tree = args.tree
        try:
            tree = tree or _patched_installed_tree(Path(tmp))
            report = run_mutation(
                tree, mutants, args.jobs, args.fail_fast, fork=not args.no_fork
            )
        except BaselineFailed as exc:
            # The tree given is no fixed baseline: refused, as bad input.
            return _fail(RefusedError(f"{tree}: {exc}"))
        except PatchkitError as exc:
            return _fail(exc)
    print(format_report(report))
    if args.json:
        payload = {
            "tree": str(tree),
            "kill_rate": report.kill_rate,
            "seconds": report.seconds,
            "runs": [dataclasses.asdict(r) for r in report.runs],
        }
        args.json.write_text(json.dumps(payload, indent=2))
    complete = len(report.valid) == len(report.runs)
    return EXIT_OK if complete and not report.survivors else EXIT_FAILED


def _fail(exc: PatchkitError) -> int:
    """Say why on stderr; the exit code is the error's (as ``cli.main``)."""
    print(f"mutation: {exc.status}: {exc}", file=sys.stderr)
    return exc.code


if __name__ == "__main__":
    sys.exit(main())
