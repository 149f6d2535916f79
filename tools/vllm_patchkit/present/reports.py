"""The plain-text renderers of judged trees: ``test``, ``demo``, the suite,
``precommit``. Models keep data; the words they are shown in live here.

The commands print them, and ``pr`` pastes them into the PR's Test Result,
so a reviewer reads exactly what the contributor saw: how many checks ran,
passed and failed, and each check that could not run, with the reason.
Only the suite's verdict rules are imported at run time, so the suite's
own process and the mutation runner can render with them too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vllm_patchkit.judge.regression.verdict import (
    FAILED,
    NOT_CARRIED,
    PASSED,
    check_fix,
    counted,
    reproduced,
    set_apart,
    status_of,
    tally,
    tally_line,
)
from vllm_patchkit.present.tables import text_table

if TYPE_CHECKING:
    from vllm_patchkit.judge.audit.findings import AuditReport
    from vllm_patchkit.judge.demo import DemoResult
    from vllm_patchkit.judge.regression.runner import TreeReport
    from vllm_patchkit.judge.verify import TreeRun, VerifyResult
    from vllm_patchkit.precommit import PrecommitResult

CELL_WIDTH = 64


def format_verify(result: VerifyResult, fix: str | None = None) -> str:
    """A before/after table: one row per check, then the upstream test.

    ``fix`` (a fix's label): only that fix's checks, counts and verdict, as
    a pull request about it shows them."""
    runs = [r for r in (result.before, result.after) if r is not None]
    header = [r.label for r in runs]
    rows: list[list[str]] = []
    names = [c["name"] for r in runs for c in _checks_of(r, fix)]
    for name in dict.fromkeys(names):
        cells = (_cell(r.checks, name, "-", r.not_counted) for r in runs)
        rows.append([name, *(cell[:CELL_WIDTH] for cell in cells)])
    if result.test_files:
        rows.append(["upstream test", *(_test_cell(r) for r in runs)])
    lines = [f"vLLM {_version(runs)} from {result.after.tree}"]
    lines += [f"  {r.label}: {r.revision}" for r in runs if r.revision]
    lines += [f"  {r.label}: {runtime_line(r.runtime)}" for r in runs if r.runtime]
    lines += [f"  {r.label}: stand-in: {s}" for r in runs for s in r.stand_ins]
    lines += text_table([["check", *header], *rows])
    for run in runs:
        lines += run_summary(run, fix)
    lines += [f"fix {line}" for line in fix_lines(result.after, fix)]
    if fix is None:
        lines.append(f"verdict: {result.verdict.heading}: {result.message}")
    return "\n".join(lines)


def _checks_of(run: TreeRun, fix: str | None) -> list[dict[str, Any]]:
    """The run's checks, or only those of ``fix``."""
    return [c for c in run.checks if fix is None or check_fix(c) == fix]


def runtime_line(runtime: dict[str, Any]) -> str:
    """Which torch and extra packages ran a tree, and what its release pins."""
    pin = runtime.get("pinned_torch")
    extras = ", ".join(runtime.get("extras") or []) or "none"
    line = (
        f"runtime: torch {runtime.get('torch')} (the release pins "
        f"{'torch ' + pin if pin else 'no torch'}); extra packages: {extras}"
    )
    missing = runtime.get("missing") or []
    if missing:
        line += f"; not provided ({len(missing)}): " + "; ".join(missing)
    return line


def _count_lines(
    checks: list[dict[str, Any]], not_counted: dict[str, str], label: str
) -> list[str]:
    """The counts of ``checks`` (those of ``not_counted``'s fixes left out),
    each check that could not run with the reason, then the checks left out:
    ``after: not carried here: <label>: 4 checks, not counted``."""
    counts = tally(counted(checks, not_counted))
    return [
        f"{label}: {tally_line(counts)}",
        *(f"{label}:   could not run: {n}: {why}" for n, why in counts.not_run),
        *(
            f"{label}: {NOT_CARRIED}: {fix}: {n} checks, not counted"
            for fix, n in set_apart(checks, not_counted).items()
        ),
    ]


def fix_lines(run: TreeRun, only: str | None = None) -> list[str]:
    """Per fix (``only``: that fix's): ``<label>: not carried here (not
    carried for 0.25.0): 4 checks, not counted``, or ``<label>: FIXED: why``
    and under it the counts its verdict rests on (how many of its checks
    ran, passed, failed, could not run)."""
    lines = []
    apart = set_apart(run.checks, run.not_counted)
    for fix, (verdict, why) in run.fix_verdicts().items():
        if only is not None and fix != only:
            continue
        if fix in run.not_counted:
            lines.append(
                f"{fix}: {NOT_CARRIED} ({run.not_counted[fix]}): "
                f"{apart.get(fix, 0)} checks, not counted"
            )
            continue
        lines.append(f"{fix}: {verdict.heading}: {why}")
        own = _checks_of(run, fix)
        if own:
            lines.append(f"{fix}:   {tally_line(tally(own))}")
    return lines


def run_summary(run: TreeRun, fix: str | None = None) -> list[str]:
    """The counts of one run (``fix``: of its checks only), what could not
    run and why, the checks of fixes not carried here (counted apart), test
    failures."""
    checks = _checks_of(run, fix)
    lines = _count_lines(checks, run.not_counted, run.label) if checks else []
    if run.problem:
        lines.append(f"{run.label}: cannot judge: {run.problem}")
    test = run.upstream_test
    if test is not None:
        lines.append(
            f"{run.label}: upstream test {' '.join(test.files)}: {test.summary}"
        )
        reason = test.inapplicable_reason or test.not_run_reason
        if reason is not None:
            lines.append(f"{run.label}:   did not run: {reason}")
        lines += [f"{run.label}:   {failure}" for failure in test.failures[:4]]
    return lines


def _version(runs: list[TreeRun]) -> str:
    return next((r.vllm_version for r in reversed(runs) if r.vllm_version), "?")


def _cell(
    checks: list[dict[str, Any]],
    name: str,
    absent: str,
    not_counted: dict[str, str] | None = None,
) -> str:
    """The check ``name``: PASS, or FAIL or NOT RUN with its detail; a check
    of a fix in ``not_counted``: :data:`NOT_CARRIED`."""
    for check in checks:
        if check["name"] == name:
            if check_fix(check) in (not_counted or {}):
                return NOT_CARRIED
            status = status_of(check)
            if status == PASSED:
                return "PASS"
            word = "FAIL" if status == FAILED else "NOT RUN"
            return f"{word} {check['detail']}"
    return absent


def _test_cell(run: TreeRun) -> str:
    test = run.upstream_test
    if test is None:
        return "-"
    if test.failed:
        return f"FAIL {test.summary}"
    if test.inapplicable_reason is not None:
        return f"DID NOT RUN (needs {', '.join(test.absent_modules)})"
    if test.not_run_reason is not None:
        return f"DID NOT RUN ({test.summary})"
    return f"PASS {test.summary}"


def format_precommit(result: PrecommitResult) -> str:
    """One line per hook (failures with their output), then a summary."""
    lines = [
        f"  {name}: missing in {result.path} (not checked)" for name in result.missing
    ]
    labels = [h.alias if h.alias else h.id for h in result.hooks]
    width = max(map(len, labels), default=0)
    for label, hook in zip(labels, result.hooks, strict=True):
        line = f"  {label:<{width}}  {hook.status}"
        if hook.status != "failed" and hook.detail:
            line += f" ({hook.detail})"
        if hook.mirror:
            line += f"  [mirror: {hook.mirror}]"
        lines.append(line)
        if hook.status == "failed" and hook.detail:
            lines += [f"      {text}" for text in hook.detail.splitlines()]
    if result.diff:
        lines.append(f"  changes the hooks made (not applied to {result.path}):")
        lines += [f"      {text}" for text in result.diff.splitlines()]
    statuses = ("passed", "failed", "skipped")
    summary = ", ".join(f"{result.count(status)} {status}" for status in statuses)
    verdict = "passed" if result.passed else "FAILED"
    lines.append(f"pre-commit on {len(result.files)} file(s): {summary}: {verdict}")
    return "\n".join(lines)


def _demo_cell(
    report: TreeReport | None, name: str, not_counted: dict[str, str]
) -> str:
    if report is None:
        return "-"
    if report.report is None:
        return "ERROR (see log)"
    return _cell(report.report["checks"], name, "n/a", not_counted)


def format_demo(result: DemoResult) -> str:
    """A short before/after table for a terminal."""
    lines = [f"vLLM tree: {result.tree} ({result.origin})"]
    if result.before.report:
        lines.append(
            f"vLLM version: {result.before.report['vllm_version']}, "
            f"imported from {result.before.report['vllm_file']}"
        )
    apart = result.judged.not_counted if result.judged is not None else {}
    before_checks = (result.before.report or {}).get("checks", [])
    names = [c["name"] for c in before_checks]
    width = max((len(n) for n in names), default=10) + 2
    lines.append("")
    lines.append(f"{'scenario':<{width}}before (stock)  ->  after (series applied)")
    for name in names:
        lines.append(
            f"{name:<{width}}{_demo_cell(result.before, name, apart)}\n"
            f"{'':<{width}}  ->  {_demo_cell(result.after, name, apart)}"
        )
    lines.append("")
    lines.append(f"series: {result.apply.status}: {result.apply.message}")
    for patch in result.apply.patches:
        detail = f" ({patch.detail})" if patch.detail else ""
        lines.append(f"  {patch.name}: {patch.status}{detail}")
    bugs = reproduced(counted(before_checks, apart))
    if bugs:
        lines.append(f"before: the bug reproduces on this tree ({', '.join(bugs)})")
    elif result.before.fixed:
        lines.append("before: this tree already behaves correctly")
    for report, label in ((result.before, "before"), (result.after, "after")):
        if report is not None and report.report is not None:
            lines += _count_lines(report.report["checks"], apart, label)
    lines.extend(result.notes)
    if result.judged is not None:
        lines += fix_lines(result.judged)
    judgement = result.judgement
    if judgement.fixed:
        lines.append("verdict: FIXED")
    else:
        lines.append(f"verdict: {judgement.verdict.heading}: {judgement.why}")
        for report, label in ((result.before, "before"), (result.after, "after")):
            if report is not None and report.report is None:
                lines.append(f"--- {label} run log (last lines) ---")
                lines.extend(report.log.splitlines()[-20:])
    return "\n".join(lines)


def format_audit(report: AuditReport) -> str:
    """Verdict and counts first, then the findings, harmful first."""
    counts = report.counts()
    seconds = ", ".join(f"{k} {v:.1f} s" for k, v in report.seconds.items())
    lines = [
        f"vLLM {report.version} at {report.tree}",
        (
            f"verdict: {report.verdict}; checks: {counts['ran']} ran, "
            f"{counts['passed']} passed, {counts['failed']} failed, "
            f"{counts['could_not_run']} could not run"
        ),
        *(f"  could not run: {c.name}: {c.why}" for c in report.could_not_run),
        f"time: {seconds}",
    ]
    findings = report.sorted_findings()
    lines.append(f"findings: {len(findings)}")
    for f in findings:
        lines.append(
            f"  {f.kind:<11} {f.file}:{f.line} {f.field} ({f.operation}) "
            f"in {f.method} [{', '.join(f.evidence)}]"
        )
        if f.victims:
            lines.append(f"      victims: {', '.join(f.victims)}")
        if f.reason:
            lines.append(f"      {f.reason}")
    return "\n".join(lines)
