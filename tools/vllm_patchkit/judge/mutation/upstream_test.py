"""Mutation power of a fix's upstream test alone.

The regression suite is this project's; what goes upstream must protect the
fix by itself once it merges. Every mutant of the fix's file (the fix's own
``upstream_mutants``: the wrong fixes a review named, each statement the fix
adds dropped, each adjacent pair of its refresh swapped) is loaded in place
of the module while pytest runs the test files the fix's patches add, on the
fixed tree, the way ``vllm-patchkit test`` runs them. A mutant is killed
when a case fails or errors; the unmutated file must pass first.

``python -m vllm_patchkit.judge.mutation.upstream_test TREE [--fix NAME]``
(the tree: a checkout after ``vllm-patchkit apply``; the base is the one
apply recorded). Exit 0 when every mutant is killed, 1 when one survives,
2 when the tree is not fixed to begin with.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vllm_patchkit.errors import EXIT_FAILED, EXIT_OK, EXIT_REFUSED
from vllm_patchkit.judge.mutation.statements import SourceMutant
from vllm_patchkit.judge.regression.by_fix import UPSTREAM
from vllm_patchkit.judge.tree_pytest import PYTEST_OPTIONS, PytestRun, run_with
from vllm_patchkit.trees.tree_process import TreeLauncher


@dataclass
class UpstreamRun:
    name: str
    description: str
    killed: bool
    summary: str
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class UpstreamReport:
    fix: str
    files: list[str]
    baseline: UpstreamRun
    runs: list[UpstreamRun]
    equivalent: list[str] = field(default_factory=list)
    """Mutants that are the fix's own program (``name: why``): not run, not
    counted, named so that the figure says what it leaves out."""

    @property
    def killed(self) -> int:
        return sum(r.killed for r in self.runs)

    @property
    def survivors(self) -> list[str]:
        return [r.name for r in self.runs if not r.killed]

    @property
    def line(self) -> str:
        """The figure the PR quotes."""
        line = (
            f"{' '.join(self.files)} alone kills {self.killed} of "
            f"{len(self.runs)} mutants of the fix"
        )
        if self.equivalent:
            line += f" ({len(self.equivalent)} more equivalent to the fix, not counted)"
        return line


def measure_fix(
    tree: Path,
    fix: str,
    base: str,
    files: list[str] | None = None,
    jobs: int = 2,
    timeout: float = 900,
) -> UpstreamReport:
    """Every upstream mutant of ``fix`` through its upstream test files
    (``files``: others) on ``tree``, against ``base``: what ``pr`` and this
    module's CLI run."""
    from vllm_patchkit.gitcmd import Git

    declared = importlib.import_module(UPSTREAM[fix])
    tests = files or list(declared.UPSTREAM_TESTS)
    relpath = Path(declared.UPSTREAM_FILE)
    fixed = (tree / relpath).read_text()
    before = Git(tree).out("show", f"{base}:{relpath.as_posix()}")
    made = declared.upstream_mutants(before, fixed)
    mutants = [m for m in made if not m.equivalent]
    equivalent = [f"{m.name}: {m.equivalent}" for m in made if m.equivalent]
    launcher = TreeLauncher.of(tree)
    with tempfile.TemporaryDirectory(prefix="vllm-overlay-upstream-mutants-") as tmp:

        def one(directory: str, mutant: SourceMutant) -> UpstreamRun:
            module_file = Path(tmp) / directory / relpath
            module_file.parent.mkdir(parents=True)
            module_file.write_text(mutant.source)
            command = [sys.executable, "-m", "vllm_patchkit.judge.mutation.worker"]
            command += [str(module_file), "--pytest", *PYTEST_OPTIONS, *tests]
            start = time.monotonic()
            run: PytestRun = run_with(launcher, tree, tests, command, timeout)
            return UpstreamRun(
                mutant.name,
                mutant.description,
                bool(run.failed or run.errors),
                run.summary,
                run.failures[:3],
                time.monotonic() - start,
            )

        unmutated = SourceMutant("baseline", "the fix as the tree has it", fixed)
        baseline = one("baseline", unmutated)
        if baseline.killed or "passed" not in baseline.summary:
            raise RuntimeError(f"the unmutated fix does not pass: {baseline.summary}")
        with ThreadPoolExecutor(max_workers=max(1, min(jobs, 2))) as pool:
            runs = list(pool.map(one, map(str, range(len(mutants))), mutants))
    return UpstreamReport(fix, tests, baseline, runs, equivalent)


def format_report(report: UpstreamReport) -> str:
    lines = [f"baseline: {report.baseline.summary}"]
    for run in report.runs:
        verdict = "killed" if run.killed else "SURVIVED"
        lines.append(f"  {verdict:8} {run.name}: {run.summary}")
    lines.extend(f"  {'same':8} {line}" for line in report.equivalent)
    lines.append(report.line)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from vllm_patchkit.git.checkout import BASE_REF

    parser = argparse.ArgumentParser(
        prog="python -m vllm_patchkit.judge.mutation.upstream_test",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("tree", type=Path)
    parser.add_argument("--fix", choices=sorted(UPSTREAM), default=next(iter(UPSTREAM)))
    parser.add_argument("--base", default=BASE_REF)
    parser.add_argument("--test", action="append", help="the test file(s)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    try:
        report = measure_fix(
            args.tree.resolve(), args.fix, args.base, args.test, args.jobs
        )
    except RuntimeError as exc:
        print(f"upstream mutation: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    print(format_report(report))
    if args.json:
        payload: dict[str, Any] = asdict(report)
        payload["line"] = report.line
        args.json.write_text(json.dumps(payload, indent=2))
    return EXIT_OK if not report.survivors else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
