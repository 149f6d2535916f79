"""Judge a vLLM source tree: does it carry a working fix for each bug of the series?

The verdict comes from running code, not from reading it: the regression
suite (:mod:`vllm_patchkit.judge.regression`) imports vLLM from the tree, on CPU,
with this venv's dependencies, and the tree's own copy of the series'
upstream tests (the test files its patches add) run under pytest. Both
must pass. A failure anywhere is "not fixed"; with no failure, a core check
that could not run, or an upstream test that errored or was not collected,
is "cannot judge": what did not run is never counted as a pass. When the tree
is a checkout with a known base (``refs/vllm-patchkit/base``, written by
apply and rebase, or ``--baseline``), the same runs on the base give the
"before" column, with the upstream test copied in from the tree, so a
contributor sees it fail there and pass here.

Each fix of the registry is judged on its own and reported separately. The
tree's verdict, and so the exit code, is over the fixes the series expects
there: a fix whose patch the series carries for the tree (by its code, else
its ``Affects:`` range; every fix on an unknown or development version), or
that upstream has carried since its ``Applied-Upstream:`` release. A fix the
series does not carry for the release is still run and reported ("not
fixed (not carried for X.Y.Z)") but decides nothing.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_overlay.fixes import FIXES as REGISTRY
from vllm_patchkit import progress
from vllm_patchkit.errors import InputError
from vllm_patchkit.git.carry import decide, read_version
from vllm_patchkit.git.checkout import BASE_REF
from vllm_patchkit.git.series import Series
from vllm_patchkit.gitcmd import Git, git_executable
from vllm_patchkit.judge.regression.runner import TreeReport, run_scenarios
from vllm_patchkit.judge.regression.verdict import (
    CANNOT_JUDGE,
    CORE_BY_FIX,
    CORE_CHECKS,
    FIXED,
    FIXES,
    HARNESS_ERROR,
    NOT_FIXED,
    Tally,
    counted,
    judge,
    judge_fixes,
    reproduced,
    tally,
)
from vllm_patchkit.judge.tree_pytest import PytestRun, run_tree_tests, series_test_files
from vllm_patchkit.judgement import Judgement, Verdict
from vllm_patchkit.trees.versions import tag_release


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
    failing_fixes: list[str] = field(default_factory=list)
    """The fixes whose checks failed here, every fix's (the suite's word)."""
    bug_reproduced: list[str] = field(default_factory=list)
    """Of those, the fixes expected here: the bugs this tree shows (a fix
    not carried here counts for nothing; see :meth:`count_apart`)."""
    suite_verdict: Verdict = CANNOT_JUDGE
    """The suite's own, over every fix (``test --json`` shows it)."""
    suite_why: str = ""
    counts: dict[str, Any] = field(default_factory=dict)
    """Checks that ran, passed, failed; those that could not run, and why."""
    checks: list[dict[str, Any]] = field(default_factory=list)
    upstream_test: PytestRun | None = None
    problem: str | None = None
    """Why the run could not judge the tree (harness failure, wrong import)."""
    not_counted: dict[str, str] = field(default_factory=dict)
    """Fixes that do not decide the verdict here, and why (not carried)."""
    stand_ins: list[str] = field(default_factory=list)
    """What the harness stood in for on this host (amdsmi's GCN arch)."""
    runtime: dict[str, Any] | None = None
    """What ran the tree: torch, the release's pin, extra packages, what
    could not be provided (:class:`vllm_patchkit.trees.tree_runtime.TreeRuntime`)."""

    @property
    def tally(self) -> Tally:
        """The checks of the fixes that count here (:attr:`not_counted`'s
        are counted apart)."""
        return tally(counted(self.checks, self.not_counted))

    def count_apart(self, not_counted: dict[str, str]) -> None:
        """Set aside the checks of the fixes not carried here (and why):
        :attr:`counts` and :attr:`tally` leave them out."""
        self.not_counted = not_counted
        self.counts = self.tally.to_json()
        self.bug_reproduced = [f for f in self.failing_fixes if f not in not_counted]

    def fix_verdicts(self) -> dict[str, tuple[Verdict, str]]:
        """Each fix's own ``(verdict, why)`` from this run's checks."""
        if not self.checks:
            return {
                fix: (CANNOT_JUDGE, self.problem or "no check ran") for fix in FIXES
            }
        return judge_fixes(self.checks)

    def judgement(self) -> Judgement:
        """This tree's one answer: suite and upstream test together, over the
        fixes the series expects here. Every command renders it (``test``,
        ``demo``, ``pr``, the matrix's suite cell, the nightly gate).

        The upstream test counts only when the tree holds it (an upstream
        release that fixed the bug its own way does not); when it does, it
        must have run: errored, skipped or uncollected cases are not a pass.
        """
        if self.problem is not None:
            return Judgement(CANNOT_JUDGE, self.problem)
        test = self.upstream_test
        reasons = []
        # The suite's verdict over the checks of the fixes that count.
        core = [n for f in FIXES if f not in self.not_counted for n in CORE_BY_FIX[f]]
        suite_verdict, suite_why = judge(
            counted(self.checks, self.not_counted), tuple(core)
        )
        reproduced = self.bug_reproduced
        if reproduced:
            reasons.append(f"the bug reproduces ({', '.join(reproduced)}: checks fail)")
        if suite_verdict == NOT_FIXED:
            reasons.append(suite_why)
        if test is not None and test.failed:
            reasons.append(f"upstream test: {test.summary}")
        if reasons:
            return Judgement(NOT_FIXED, "; ".join(reasons), bool(reproduced))
        if suite_verdict != FIXED:
            return Judgement(CANNOT_JUDGE, _suite_cannot_judge(self, suite_why))
        if test is not None and test.inapplicable_reason is not None:
            # The test targets a later layout: it did not run and is not a
            # pass; the suite's core checks, which did run, decide.
            return Judgement(
                FIXED,
                "the fix is present and behaves correctly (the suite's core "
                f"checks; the upstream test {' '.join(test.files)} did not "
                f"run: {test.inapplicable_reason})",
            )
        if test is not None and test.not_run_reason is not None:
            return Judgement(
                CANNOT_JUDGE,
                f"the upstream test {' '.join(test.files)} did not run: "
                f"{test.not_run_reason}",
            )
        return Judgement(FIXED, "the fix is present and behaves correctly")


@dataclass
class VerifyResult:
    verdict: Verdict
    """The after run's :meth:`TreeRun.judgement`; ``message`` says why."""
    message: str
    after: TreeRun
    before: TreeRun | None = None
    test_files: list[str] = field(default_factory=list)


class NotATreeError(InputError):
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
    base = baseline
    if base is None and (tree / ".git").exists() and Git(tree).commit_of(BASE_REF):
        base = BASE_REF  # recorded by apply and rebase
    base_commit = _commit(tree, base) if base is not None and compare else None
    test_files = series_test_files(series)
    steps = 2 if base_commit is not None else 1
    progress.step(f"test 1/{steps}: {tree} as it is (after)")
    after = judge_tree(tree, series, run_scenarios(tree))
    after.revision = _describe(tree, "HEAD")
    before = None
    if base is not None and base_commit is not None:
        progress.step(f"test 2/2: the base {base} at {base_commit[:12]} (before)")
        before = _run_base(tree, base, base_commit, test_files)
        before.count_apart(after.not_counted)
    judged = after.judgement()
    return VerifyResult(judged.verdict, judged.why, after, before, test_files)


def fixes_not_counted(series: Series, tree: Path) -> dict[str, str]:
    """The fixes that do not decide ``tree``'s verdict, and why.

    A fix counts when the series carries its patch for the tree, or
    upstream carries it there (:func:`vllm_patchkit.git.carry.decide`: by the
    tree's code, or its version where the code cannot be read).
    """
    version = read_version(tree)
    skipped = {}
    for fix in REGISTRY:
        patch = next(iter(series.of_fix(fix)), None)
        if patch is None:
            skipped[fix.pr] = "the series has no patch for it"
            continue
        carry = decide(patch, tree, version)
        if not (carry.carried or carry.fixed):
            said = carry.overrides or not version.trusted
            skipped[fix.pr] = f"not carried for {version.version}" + (
                f": {carry.why}" if said else ""
            )
    return skipped


def judge_tree(
    tree: Path,
    series: Series,
    report: TreeReport,
    label: str = "after",
    *,
    upstream_test: bool = True,
) -> TreeRun:
    """The run ``test`` judges ``tree`` by, from a suite ``report`` already
    made there: the tree's upstream test runs, and the fixes the series does
    not carry for its release are set aside. Its :meth:`TreeRun.judgement`
    is the verdict every command gives for the tree (demo, pr, the nightly
    gate through ``test``; the matrix, whose cells are the suite alone, with
    ``upstream_test=False``)."""
    files = series_test_files(series) if upstream_test else None
    run = tree_run(tree.resolve(), label, files, report)
    run.count_apart(fixes_not_counted(series, tree))
    return run


def run_tree(tree: Path, label: str, test_files: list[str]) -> TreeRun:
    return tree_run(tree, label, test_files, run_scenarios(tree))


def tree_run(
    tree: Path, label: str, test_files: list[str] | None, report: TreeReport
) -> TreeRun:
    """A :class:`TreeRun` of ``report`` (the suite on ``tree``), with the
    tree's upstream test run beside it (not with ``test_files`` None)."""
    run = TreeRun(label, str(tree))
    if report.runtime is not None:
        run.runtime = report.runtime.to_json()
    run.stand_ins = list((report.report or {}).get("stand_ins") or [])
    if report.report is None:
        tail = "\n".join(report.log.strip().splitlines()[-5:])
        run.problem = f"the regression suite did not report (exit {report.returncode})"
        run.problem += f": {tail}" if tail else ""
        return run
    data = report.report
    run.vllm_version = data["vllm_version"]
    run.vllm_file = data["vllm_file"]
    run.fixed = data["fixed"]
    run.checks = data["checks"]
    run.failing_fixes = _reproduced(data["bug_reproduced"], run.checks)
    run.bug_reproduced = list(run.failing_fixes)
    run.suite_verdict = Verdict(data["verdict"])
    run.suite_why = data["why"]
    run.counts = tally(run.checks).to_json()
    if not Path(data["vllm_file"]).resolve().is_relative_to(tree):
        run.problem = (
            f"the suite imported vLLM from {data['vllm_file']}, not from {tree}; "
            "is the tree complete?"
        )
        return run
    if test_files is not None:
        run.upstream_test = run_tree_tests(tree, test_files, runtime=report.runtime)
    return run


def _reproduced(said: object, checks: list[dict[str, Any]]) -> list[str]:
    """The suite's list of fixes whose checks failed (a report from before it
    named them said yes or no: then its checks say which)."""
    if isinstance(said, list):
        return [str(fix) for fix in said]
    return reproduced(checks) if said else []


def _suite_cannot_judge(run: TreeRun, suite_why: str) -> str:
    """Why no failure still is no verdict, in the user's terms."""
    harness = [(n, w) for n, w in run.tally.not_run if w.startswith(HARNESS_ERROR)]
    if any(name in CORE_CHECKS for name, _ in harness):
        name, why = harness[0]
        return (
            f"the suite cannot run on vLLM {run.vllm_version} with this venv: "
            f"{len(harness)} harness errors, first {name}: {why[:160]}; "
            f"{suite_why}"
        )
    return suite_why or "no check ran"


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
        # The requirement files travel too: the base's runtime reads them; so
        # does the base's tests/ when there is an upstream test, whose helpers
        # (tests/v1/attention/utils.py for 0005) it imports.
        paths = ["vllm"]
        wanted = ["requirements", *(["tests"] if test_files else [])]
        for name in wanted:
            probe = Git(tree).run("cat-file", "-e", f"{commit}:{name}", check=False)
            if probe.returncode == 0:
                paths.append(name)
        archive = subprocess.run(
            [git_executable(), "archive", "--format=tar", commit, *paths],
            cwd=tree,
            capture_output=True,
            check=True,
        )
        subprocess.run(
            ["tar", "-x", "-C", str(export)], input=archive.stdout, check=True
        )
        _claim_release(tree, commit, export)
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


def _claim_release(tree: Path, commit: str, export: Path) -> None:
    """Give an export of a checkout the ``_version.py`` an install would
    write: outside git, the base's release tag is otherwise lost."""
    version_file = export / "vllm" / "_version.py"
    if version_file.exists():
        return
    release = tag_release(Git(tree), commit)
    if release is not None:
        version_file.write_text(f"__version__ = version = {release!r}\n")
