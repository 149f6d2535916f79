"""``python -m vllm_patchkit.judge.regression``: run the scenarios in this process.

Set ``PYTHONPATH`` to a vLLM source tree to test that tree; the JSON output
names the ``vllm`` package that was actually imported. Each fix of the
registry gets its own verdict under ``fixes``; the exit status is the verdict
over every check: 0 fixed, 1 not fixed (a check failed), 3 cannot judge (no
check failed, but a core check could not run here). ``vllm-patchkit test``
decides which fixes count for a tree.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vllm_patchkit.judge.regression.layout import run_quietly_on_cpu
from vllm_patchkit.trees.child_json import exit_with


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m vllm_patchkit.judge.regression", description=__doc__
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--output", metavar="FILE", help="write the JSON report to FILE instead"
    )
    parser.add_argument(
        "--scenario", action="append", help="run only this scenario (repeatable)"
    )
    parser.add_argument(
        "--fail-fast",
        action="store_true",
        help="stop at the first failing check (mutation runs); a check that "
        "could not run does not stop it",
    )
    parser.add_argument(
        "--tree-reads",
        action="store_true",
        help="report what the run read of the vLLM tree outside its vllm "
        "package (the report cache shares a run only when that is nothing)",
    )
    args = parser.parse_args(argv)
    reads = None
    if args.tree_reads:
        from vllm_patchkit.judge.regression.tree_reads import TreeReads

        reads = TreeReads()  # before vLLM is imported
    run_quietly_on_cpu()
    import vllm

    from vllm_patchkit.judge.regression.layout import release_under_test, stand_ins
    from vllm_patchkit.judge.regression.scenarios import SCENARIOS, Outcome, run_all
    from vllm_patchkit.judge.regression.verdict import (
        FAILED,
        FIXED,
        fixed_checks,
        judge,
        judge_fixes,
        reproduced,
        tally,
        tally_line,
    )

    unknown = set(args.scenario or []) - SCENARIOS.keys()
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")

    def failed(outcome: Outcome) -> bool:
        return args.fail_fast and fixed_checks([outcome])[0].status == FAILED

    outcomes = run_all(args.scenario, stop=failed)
    import torch  # imported by vLLM already: its version for the report

    checks = fixed_checks(outcomes)
    verdict, why = judge(checks)
    counts = tally(checks)
    report = {
        # The release as the toolkit reads the tree (a checkout's tag; vLLM
        # itself says "dev" there), else what vLLM says of itself.
        "vllm_version": str(release)
        if (release := release_under_test()) is not None
        else getattr(vllm, "__version__", "unknown"),
        "vllm_own_version": getattr(vllm, "__version__", "unknown"),
        "vllm_file": vllm.__file__,
        "torch": str(torch.__version__),
        "stand_ins": stand_ins(),
        "verdict": verdict,
        "why": why,
        "fixed": verdict == FIXED,
        "bug_reproduced": reproduced(checks),
        "counts": counts.to_json(),
        "fixes": {
            fix: {"verdict": v, "why": w} for fix, (v, w) in judge_fixes(checks).items()
        },
        "checks": [c.to_json() for c in checks],
        "outcomes": [o.to_json() for o in outcomes],
    }
    if reads is not None:
        package = Path(vllm.__file__).parent
        report["tree_reads_outside_package"] = reads.outside(package)
    if args.output:
        with open(args.output, "w") as out:
            json.dump(report, out, indent=2)
    elif args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    if not args.json:
        print(f"vLLM {report['vllm_version']} from {report['vllm_file']}")
        print(f"torch {report['torch']}")
        for line in report["stand_ins"]:
            print(f"stand-in: {line}")
        for check in checks:
            label = {"passed": "PASS", "failed": "FAIL"}.get(check.status, "NOT RUN")
            print(f"  {label} {check.name}: {check.detail}")
        print(tally_line(counts))
        for fix, judged in report["fixes"].items():
            print(f"{fix}: {judged['verdict'].heading}: {judged['why']}")
        print(f"verdict: {verdict.heading}: {why}")
    return verdict.exit_code


if __name__ == "__main__":
    exit_with(main)
