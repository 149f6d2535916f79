"""Judge a vLLM source tree: does it carry a working fix for vLLM #51585?

The verdict comes from running code, not from reading it: the regression
suite (:mod:`vllm_patchkit.regression`) imports vLLM from the tree, on CPU,
with this venv's dependencies, and the tree's own copy of the series'
upstream test (patch 0002) runs under pytest. Both must pass. A failure
anywhere is "not fixed"; with no failure, a core check that could not run,
or an upstream test that errored or was not collected, is "cannot judge":
what did not run is never counted as a pass. When the tree
is a checkout with a known base (``refs/vllm-patchkit/base``, written by
apply and rebase, or ``--baseline``), the same runs on the base give the
"before" column, with the upstream test copied in from the tree, so a
contributor sees it fail there and pass here.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_patchkit.checkout import BASE_REF
from vllm_patchkit.gitcmd import Git, git_executable
from vllm_patchkit.regression.runner import run_scenarios
from vllm_patchkit.regression.verdict import (
    CANNOT_JUDGE,
    CORE_CHECKS,
    FIXED,
    HARNESS_ERROR,
    NOT_FIXED,
    Tally,
    tally,
)
from vllm_patchkit.series import Series
from vllm_patchkit.tree_pytest import PytestRun, run_tree_tests, series_test_files


@dataclass
class TreeRun:
    label: str
    """before or after."""
    tree: str
    revision: str = ""
    """The commit, for a checkout: ``73ef077 vLLM 0.28.0``."""
    vllm_version: str | None = None
    vllm_file: str | None = None
    fixed: bool = False
    bug_reproduced: bool = False
    suite_verdict: str = CANNOT_JUDGE
    """The suite's own: fixed, not-fixed or cannot-judge."""
    suite_why: str = ""
    counts: dict[str, Any] = field(default_factory=dict)
    """Checks that ran, passed, failed; those that could not run, and why."""
    checks: list[dict[str, Any]] = field(default_factory=list)
    upstream_test: PytestRun | None = None
    problem: str | None = None
    """Why the run could not judge the tree (harness failure, wrong import)."""

    @property
    def tally(self) -> Tally:
        return tally(self.checks)

    def judgement(self) -> tuple[str, str]:
        """``(verdict, why)`` for this tree: suite and upstream test together.

        The upstream test counts only when the tree holds it (an upstream
        release that fixed the bug its own way does not); when it does, it
        must have run: errored, skipped or uncollected cases are not a pass.
        """
        if self.problem is not None:
            return CANNOT_JUDGE, self.problem
        test = self.upstream_test
        reasons = []
        if self.bug_reproduced:
            reasons.append(
                "the bug reproduces (host query offsets zeroed during capture)"
            )
        if self.suite_verdict == NOT_FIXED:
            failed = [c["name"] for c in self.checks if c.get("status") == "failed"]
            reasons.append(f"failing checks: {', '.join(failed)}")
        if test is not None and test.failed:
            reasons.append(f"upstream test: {test.summary}")
        if reasons:
            return NOT_FIXED, "; ".join(reasons)
        if self.suite_verdict != FIXED:
            return CANNOT_JUDGE, _suite_cannot_judge(self)
        if test is not None and test.not_run_reason is not None:
            return CANNOT_JUDGE, (
                f"the upstream test {' '.join(test.files)} did not run: "
                f"{test.not_run_reason}"
            )
        return FIXED, "the fix is present and behaves correctly"


@dataclass
class VerifyResult:
    verdict: str
    """fixed, not-fixed or cannot-judge."""
    message: str
    after: TreeRun
    before: TreeRun | None = None
    test_files: list[str] = field(default_factory=list)


class NotATreeError(ValueError):
    """The path holds no vLLM source tree."""


def verify_tree(
    path: Path, series: Series, baseline: str | None = None, *, compare: bool = True
) -> VerifyResult:
    """Run the suite (and the tree's upstream test) on ``path``, and its base.

    ``compare=False`` skips the base run, which halves the time.
    """
    tree = path.resolve()
    if not (tree / "vllm" / "__init__.py").is_file():
        raise NotATreeError(f"{tree}: not a vLLM source tree (no vllm/__init__.py)")
    if baseline is not None and not (tree / ".git").exists():
        raise NotATreeError(f"{tree}: --baseline needs a git checkout")
    base = baseline or _recorded_base(tree)
    base_commit = _commit(tree, base) if base is not None and compare else None
    test_files = series_test_files(series)
    after = run_tree(tree, "after", test_files)
    after.revision = _describe(tree, "HEAD")
    before = None
    if base is not None and base_commit is not None:
        before = _run_base(tree, base, base_commit, test_files)
    verdict, message = after.judgement()
    return VerifyResult(verdict, message, after, before, test_files)


def run_tree(tree: Path, label: str, test_files: list[str]) -> TreeRun:
    run = TreeRun(label, str(tree))
    report = run_scenarios(tree)
    if report.report is None:
        tail = "\n".join(report.log.strip().splitlines()[-5:])
        run.problem = f"the regression suite did not report (exit {report.returncode})"
        run.problem += f": {tail}" if tail else ""
        return run
    data = report.report
    run.vllm_version = data["vllm_version"]
    run.vllm_file = data["vllm_file"]
    run.fixed = data["fixed"]
    run.bug_reproduced = data["bug_reproduced"]
    run.suite_verdict = data["verdict"]
    run.suite_why = data["why"]
    run.checks = data["checks"]
    run.counts = tally(run.checks).to_json()
    if not Path(data["vllm_file"]).resolve().is_relative_to(tree):
        run.problem = (
            f"the suite imported vLLM from {data['vllm_file']}, not from {tree}; "
            "is the tree complete?"
        )
        return run
    run.upstream_test = run_tree_tests(tree, test_files)
    return run


def _suite_cannot_judge(run: TreeRun) -> str:
    """Why no failure still is no verdict, in the user's terms."""
    harness = [(n, w) for n, w in run.tally.not_run if w.startswith(HARNESS_ERROR)]
    if any(name in CORE_CHECKS for name, _ in harness):
        name, why = harness[0]
        return (
            f"the suite cannot run on vLLM {run.vllm_version} with this venv: "
            f"{len(harness)} harness errors, first {name}: {why[:160]}; "
            f"{run.suite_why}"
        )
    return run.suite_why or "no check ran"


def _recorded_base(tree: Path) -> str | None:
    if not (tree / ".git").exists():
        return None
    return BASE_REF if Git(tree).commit_of(BASE_REF) else None


def _describe(tree: Path, rev: str) -> str:
    """``<short hash> <subject>`` of ``rev``: which commit a column is."""
    if not (tree / ".git").exists():
        return "not a git checkout"
    proc = Git(tree).run("log", "-1", "--format=%h %s", rev, "--", check=False)
    line = proc.stdout.strip()
    return line if proc.returncode == 0 and line else rev


def _commit(tree: Path, rev: str) -> str:
    commit = Git(tree).commit_of(rev)
    if commit is None:
        raise NotATreeError(f"{tree}: baseline {rev!r} is not a commit")
    return commit


def _run_base(tree: Path, base: str, commit: str, test_files: list[str]) -> TreeRun:
    """The suite on ``commit``, exported with ``git archive`` (tree untouched)."""
    with tempfile.TemporaryDirectory(prefix="vllm-patchkit-base-") as scratch:
        export = Path(scratch)
        archive = subprocess.run(
            [git_executable(), "archive", "--format=tar", commit, "vllm"],
            cwd=tree,
            capture_output=True,
            check=True,
        )
        subprocess.run(
            ["tar", "-x", "-C", str(export)], input=archive.stdout, check=True
        )
        # The upstream test comes from the tree under test: it is what must
        # fail on the base.
        for name in test_files:
            source = tree / name
            if source.is_file():
                target = export / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(source.read_bytes())
        run = run_tree(export, "before", test_files)
    run.tree = f"{tree} at {commit[:12]}"
    run.revision = f"{base}: {_describe(tree, commit)}"
    return run
