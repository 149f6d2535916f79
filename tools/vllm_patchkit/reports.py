"""Plain-text reports of ``test`` and ``precommit`` runs.

The commands print them, and ``pr`` pastes them into the PR's Test Result,
so a reviewer reads exactly what the contributor saw.
"""

from __future__ import annotations

from vllm_patchkit.precommit import PrecommitResult
from vllm_patchkit.verify import TreeRun, VerifyResult

CELL_WIDTH = 64


def format_verify(result: VerifyResult) -> str:
    """A before/after table: one row per check, then the upstream test."""
    runs = [r for r in (result.before, result.after) if r is not None]
    header = [r.label for r in runs]
    rows: list[list[str]] = []
    names = [c["name"] for r in runs for c in r.checks]
    for name in dict.fromkeys(names):
        rows.append([name, *(_cell(r, name) for r in runs)])
    if result.test_files:
        rows.append(["upstream test", *(_test_cell(r) for r in runs)])
    lines = [f"vLLM {_version(runs)} from {result.after.tree}"]
    lines += [f"  {r.label}: {r.revision}" for r in runs if r.revision]
    lines += _table(["check", *header], rows)
    for run in runs:
        if run.problem:
            lines.append(f"{run.label}: cannot judge: {run.problem}")
        test = run.upstream_test
        for failure in test.failures[:4] if test else []:
            lines.append(f"{run.label}: {failure}")
    lines.append(f"verdict: {result.verdict.upper()}: {result.message}")
    return "\n".join(lines)


def _version(runs: list[TreeRun]) -> str:
    return next((r.vllm_version for r in reversed(runs) if r.vllm_version), "?")


def _cell(run: TreeRun, name: str) -> str:
    for check in run.checks:
        if check["name"] == name:
            if check["passed"]:
                return "PASS"
            return f"FAIL {check['detail']}"[:CELL_WIDTH]
    return "-"


def _test_cell(run: TreeRun) -> str:
    if run.upstream_test is None:
        return "-"
    if not run.upstream_test.ran:
        return f"NOT RUN here ({run.upstream_test.summary})"
    verdict = "PASS" if run.upstream_test.ok else "FAIL"
    return f"{verdict} {run.upstream_test.summary}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(
            cell.ljust(width) for cell, width in zip(row, widths, strict=True)
        ).rstrip()
        for row in [header, *rows]
    ]


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
    counts = {
        status: sum(h.status == status for h in result.hooks)
        for status in ("passed", "failed", "skipped")
    }
    summary = ", ".join(f"{n} {status}" for status, n in counts.items())
    verdict = "passed" if result.passed else "FAILED"
    lines.append(f"pre-commit on {len(result.files)} file(s): {summary}: {verdict}")
    return "\n".join(lines)
