"""One audit of one tree: the static pass and the dynamic pass, merged and judged.

The static pass sees every write in the source; the dynamic pass sees the
writes the builders it could run on CPU really make, and what each does to
the builders that follow (:mod:`.effect`). A statement both passes saw is one
finding with evidence ``["static", "dynamic"]``, judged by its effect. A
statement only the static pass saw was not exercised: it is ``latent`` with
that reason and its effect check could not run, so the verdict is "cannot
judge" unless a harmful finding already decides it. It is ``intentional``
only when it is a documented band-aid. Nothing is harmful by guess.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from vllm_patchkit.judge.audit import draft_update
from vllm_patchkit.judge.audit.bands import intentional
from vllm_patchkit.judge.audit.draft_update import RULE
from vllm_patchkit.judge.audit.findings import AuditReport, Check, Finding
from vllm_patchkit.judge.audit.reach import Reach
from vllm_patchkit.judge.audit.static import StaticResult, StaticWrite, analyse_tree
from vllm_patchkit.trees.versions import tree_release

TYPE_CHECKING = False
if TYPE_CHECKING:
    from vllm_patchkit.judge.audit.dynamic import DynamicResult


def audit_tree(
    tree: Path,
    *,
    dynamic: bool = True,
    installed: bool = False,
    timeout: float = 1200,
) -> AuditReport:
    """Audit ``tree`` (a source tree, or the installed vLLM's site directory).

    ``installed``: ``tree`` is where this environment's vLLM lives, so the
    dynamic pass runs it as installed rather than putting a tree on the path.
    ``dynamic=False`` runs only the static pass (every write not exercised).
    """
    report = AuditReport(tree=str(tree), version=tree_release(tree)[0])
    start = time.monotonic()
    static = analyse_tree(tree)
    report.seconds["static"] = round(time.monotonic() - start, 2)
    report.checks.append(_static_check(static))
    report.checks.extend(not_read_checks(static))
    report.runtime["static"] = {
        "metadata_class": static.metadata_class,
        "fields": static.fields,
        "builders": len(static.builders),
    }

    result = None
    if dynamic:
        from vllm_patchkit.judge.audit.dynamic import run_dynamic

        start = time.monotonic()
        result = run_dynamic(None if installed else tree, timeout=timeout)
        report.seconds["dynamic"] = round(time.monotonic() - start, 2)
        report.runtime.update(result.runtime)
        report.runtime["coverage"] = _coverage(result)
        report.runtime["draft_updates"] = draft_update.summary(result)
        report.checks.append(dynamic_check(result))
    else:
        report.checks.append(
            Check("dynamic pass", False, why="not requested (--static-only)")
        )
    report.checks.append(draft_update.check(result))
    report.findings = merge(static, result)
    report.checks.extend(_effect_checks(report.findings))
    report.seconds["total"] = round(sum(report.seconds.values()), 2)
    return report


def dynamic_check(result: DynamicResult) -> Check:
    """The dynamic pass as one check: passed only when it ran a builder. A
    pass that ran none (every builder could not run on CPU) saw nothing, so
    it could not run; it is not a pass."""
    if result.error:
        return Check("dynamic pass", False, why=result.error)
    counts = (
        f"{len(result.ran)} builder run(s); "
        f"{len(result.could_not_run)} could not run on CPU"
    )
    if not result.ran:
        return Check("dynamic pass", False, why=f"no builder ran: {counts}")
    return Check("dynamic pass", True, True, counts)


def merge(static: StaticResult, result: DynamicResult | None) -> list[Finding]:
    """Static writes and dynamic findings, one finding per file, line and field."""
    seen = []
    if result is not None and not result.error:
        from vllm_patchkit.judge.audit.effect import classify  # imports the dynamic

        seen = classify(result)
    merged: dict[tuple[str, int, str], Finding] = {}
    for finding in seen:
        key = finding.key
        if key in merged:  # two operations on one line: keep both names
            other = merged[key]
            other.operation = f"{other.operation}, {finding.operation}"
            other.victims += [v for v in finding.victims if v not in other.victims]
            if rank(finding.kind) < rank(other.kind):
                other.kind, other.reason = finding.kind, finding.reason
            continue
        merged[key] = finding
    why_not = _why_not_exercised(result)
    for write in static.writes:
        key = (write.file, write.line, write.field)
        if key in merged:
            if "static" not in merged[key].evidence:
                merged[key].evidence.insert(0, "static")
            continue
        merged[key] = _static_only(write, why_not)
    for key, reach in static.reach.items():
        if key in merged and merged[key].kind == "intentional":
            judge_reach(merged[key], reach)
    if result is not None and not result.error:
        for finding in draft_update.findings(result):
            merged.setdefault(
                (finding.file, finding.line, f"{finding.field} {RULE}"), finding
            )
    return list(merged.values())


def judge_reach(finding: Finding, reach: Reach) -> None:
    """A band-aid is intentional for the backend it was made for; where
    another backend runs it and reads what it wrote, it is harmful for that
    backend (:mod:`.reach`), and the finding names it."""
    if reach.harmful:
        finding.kind = "harmful"
        finding.victims = [*reach.victims]
        finding.reason = f"{reach.reason()} ({finding.reason})"
    elif reach.recipients:
        finding.reason += f"; {reach.reason()}"


def _static_only(write: StaticWrite, why_not: str) -> Finding:
    kind = "latent"
    reason = f"not exercised: {why_not}; reached from {', '.join(write.via[:4])}" + (
        f" and {len(write.via) - 4} more" if len(write.via) > 4 else ""
    )
    band = intentional(write)
    if band is not None:
        kind = "intentional"
        reason = f"{band.reason} (seen in the source; not exercised: {why_not})"
    return Finding(
        write.file,
        write.line,
        write.field,
        write.method,
        write.operation,
        kind,
        evidence=["static"],
        reason=reason,
    )


def _why_not_exercised(result: DynamicResult | None) -> str:
    if result is None:
        return "the dynamic pass was not run"
    if result.error:
        return f"the dynamic pass could not run ({result.error.splitlines()[0]})"
    return "no builder the dynamic pass could run on CPU made this write"


def _static_check(static: StaticResult) -> Check:
    if static.metadata_class is None:
        return Check(
            "static pass", False, why="no CommonAttentionMetadata class in the tree"
        )
    return Check(
        "static pass",
        True,
        True,
        f"{len(static.builders)} builder class(es) read; "
        f"{len(static.writes)} write(s) found",
    )


def not_read_checks(static: StaticResult) -> list[Check]:
    """One check that could not run per module not read or not parsed (too
    large, not a regular file, not Python text): a write there is unseen, so
    the audit cannot judge."""
    return [
        Check(f"static read of {path}", False, why=f"{why}: not read")
        for path, why in sorted(static.not_read.items())
    ]


def _effect_checks(findings: list[Finding]) -> list[Check]:
    """One check per finding whose kind rests on a measured effect."""
    checks = []
    for finding in sorted(findings, key=lambda f: f.key):
        name = f"effect of {finding.file}:{finding.line} {finding.field}"
        if finding.operation == RULE:
            continue  # judged by the draft decode update check
        if "dynamic" in finding.evidence or finding.kind == "harmful":
            # Measured, or a band-aid read by a backend it was not made for.
            checks.append(
                Check(name, True, finding.kind != "harmful", why=finding.kind)
            )
        elif finding.kind != "intentional":
            checks.append(Check(name, False, why=finding.reason))
    return checks


def _coverage(result: DynamicResult) -> dict[str, Any]:
    return {
        "ran": len(result.ran),
        "could_not_run": [
            {"builder": r.builder, "mode": r.mode, "status": r.status, "why": r.reason}
            for r in result.could_not_run
        ],
    }


def rank(kind: str) -> int:
    """Strongest first: a harmful write, a band-aid, a write not judged."""
    return {"harmful": 0, "intentional": 1, "latent": 2}.get(kind, 3)
