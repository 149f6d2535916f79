"""Judge a vLLM source tree: does it carry a working fix for vLLM #51585?

The verdict comes from running code, not from reading it: the regression
suite (:mod:`vllm_patchkit.regression`) imports vLLM from the tree, on CPU,
with this venv's dependencies, and the tree's own copy of the series'
upstream test (patch 0002) runs under pytest. Both must pass. When the tree
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
from vllm_patchkit.regression.verdict import HARNESS_ERROR
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
    checks: list[dict[str, Any]] = field(default_factory=list)
    upstream_test: PytestRun | None = None
    problem: str | None = None
    """Why the run could not judge the tree (harness failure, wrong import)."""

    @property
    def passed(self) -> bool:
        test = self.upstream_test
        # A test that cannot run on this tree says nothing either way; the
        # suite alone judges it (and the output says the test did not run).
        test_ok = test is None or not test.ran or test.ok
        return self.problem is None and self.fixed and test_ok


@dataclass
class VerifyResult:
    verdict: str
    """fixed, not-fixed or error."""
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
    if after.problem is None and not after.passed:
        after.problem = _cannot_judge(after)
    if after.problem is not None:
        verdict, message = "error", after.problem
    elif after.passed:
        verdict, message = "fixed", "the fix is present and behaves correctly"
    else:
        verdict, message = "not-fixed", _why_not(after)
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
    run.checks = data["checks"]
    if not Path(data["vllm_file"]).resolve().is_relative_to(tree):
        run.problem = (
            f"the suite imported vLLM from {data['vllm_file']}, not from {tree}; "
            "is the tree complete?"
        )
        return run
    run.upstream_test = run_tree_tests(tree, test_files)
    return run


def _cannot_judge(run: TreeRun) -> str | None:
    """Why the failures say nothing about the fix, when they all are harness
    errors (the tree's vLLM does not run with this venv's dependencies)."""
    failed = [c for c in run.checks if not c["passed"]]
    harness = [c for c in failed if c["detail"].startswith(HARNESS_ERROR)]
    if run.bug_reproduced or not harness or len(harness) < len(failed):
        return None
    return (
        f"the suite cannot run on vLLM {run.vllm_version} with this venv: "
        f"{len(harness)} harness errors, first {harness[0]['name']}: "
        f"{harness[0]['detail'][:160]}"
    )


def _why_not(run: TreeRun) -> str:
    failed = [c["name"] for c in run.checks if not c["passed"]]
    parts = []
    if run.bug_reproduced:
        parts.append("the bug reproduces (host query offsets zeroed during capture)")
    if failed:
        parts.append(f"failing checks: {', '.join(failed)}")
    test = run.upstream_test
    if test is not None and test.ran and not test.ok:
        parts.append(f"upstream test: {test.summary}")
    return "; ".join(parts) or "no check ran"


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
