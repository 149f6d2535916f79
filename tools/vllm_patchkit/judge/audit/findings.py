"""The audit's data model: one finding per shared-state write, one report per tree.

A finding names a statement (file relative to the tree root, line) that writes
a field of vLLM's ``CommonAttentionMetadata`` from inside a metadata builder,
and says what that write does to the builders that run after it. The report
carries every finding, every check the audit meant to run (a check that could
not run is never counted as passed), and the exit code the CLI returns, its
:class:`~vllm_patchkit.judgement.Verdict`'s: 1 when a harmful finding exists
(the bug's class is there: not fixed), 3 when the audit cannot judge, else 0.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from vllm_patchkit.judgement import Verdict

KINDS = ("harmful", "latent", "intentional")
# Human output and JSON list findings in this order: harmful first.
KIND_RANK = {kind: rank for rank, kind in enumerate(KINDS)}


@dataclass
class Finding:
    """One in-place write (or reassignment) of a shared metadata field."""

    file: str
    line: int
    field: str
    method: str
    operation: str
    kind: str = "latent"
    victims: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    reason: str = ""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    @property
    def key(self) -> tuple[str, int, str]:
        """Where and what: the static and dynamic passes merge on this."""
        return (self.file, self.line, self.field)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Check:
    """One thing the audit tried to do; ``ran`` False means it could not."""

    name: str
    ran: bool
    passed: bool = False
    why: str = ""

    def to_json(self) -> dict[str, Any]:
        status = "passed" if self.passed else "failed" if self.ran else "could not run"
        return {"name": self.name, "status": status, "why": self.why}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Check:
        status = data["status"]
        return cls(
            data["name"], status != "could not run", status == "passed", data["why"]
        )


_WORDS = {Verdict.NOT_FIXED: "harmful", Verdict.FIXED: "no harmful write"}


@dataclass
class AuditReport:
    """Findings of one tree, the checks behind them, and the verdict."""

    tree: str
    version: str | None
    findings: list[Finding] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    runtime: dict[str, Any] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def sorted_findings(self) -> list[Finding]:
        return sorted(
            self.findings,
            key=lambda f: (KIND_RANK.get(f.kind, len(KINDS)), f.file, f.line, f.field),
        )

    @property
    def harmful(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == "harmful"]

    @property
    def could_not_run(self) -> list[Check]:
        return [c for c in self.checks if not c.ran]

    @property
    def judgement(self) -> Verdict:
        """A harmful write is the bug's class, present: not fixed; else a
        check that could have found one and did not run: cannot judge."""
        if self.harmful:
            return Verdict.NOT_FIXED
        if self.could_not_run:
            return Verdict.CANNOT_JUDGE
        return Verdict.FIXED

    @property
    def verdict(self) -> str:
        """The audit's own words: harmful, cannot judge, no harmful write."""
        return _WORDS.get(self.judgement, self.judgement.words)

    @property
    def exit_code(self) -> int:
        return self.judgement.exit_code

    def counts(self) -> dict[str, int]:
        ran = [c for c in self.checks if c.ran]
        return {
            "ran": len(ran),
            "passed": sum(c.passed for c in ran),
            "failed": sum(not c.passed for c in ran),
            "could_not_run": len(self.could_not_run),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AuditReport:
        """The report :meth:`to_json` wrote (for reports kept as JSON)."""
        return cls(
            tree=data["tree"],
            version=data["version"],
            findings=[Finding.from_json(f) for f in data["findings"]],
            checks=[Check.from_json(c) for c in data["checks"]["list"]],
            runtime=data.get("runtime", {}),
            seconds=data.get("seconds", {}),
        )

    def to_json(self) -> dict[str, Any]:
        kinds = {kind: 0 for kind in KINDS}
        for finding in self.findings:
            kinds[finding.kind] = kinds.get(finding.kind, 0) + 1
        return {
            "tree": self.tree,
            "version": self.version,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "counts": kinds,
            "checks": {
                **self.counts(),
                "list": [c.to_json() for c in self.checks],
                "could_not_run_names": [c.name for c in self.could_not_run],
            },
            "findings": [f.to_json() for f in self.sorted_findings()],
            "runtime": self.runtime,
            "seconds": self.seconds,
        }
