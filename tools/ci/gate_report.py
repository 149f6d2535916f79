"""Sum up the checks the nightly job ran on the rebased checkout.

``tools/ci/run-gate.sh`` runs each check (``vllm-patchkit precommit``,
``test``, the sign-off dry run of every fix's PR), keeps its output in
``OUT/gates/NAME.log`` and appends ``NAME<TAB>EXIT`` to ``OUT/gates.tsv``.
This reads them and, when a check did not pass, writes the issue the job
files or comments on: ``issue-title.txt`` (the same title as a conflict's,
one per upstream repository and ref) and ``issue-body.md``. The body names
the real cause: a check that ran and found a problem (``test`` exit 1: a fix
is wrong on this release; a fix's PR lacking a sign-off) apart from a check
that could not run (exit 3, or a refusal of its input), which is said as
such and is no verdict on the series. Prints ``failed=NAME,...`` (every
check that did not pass; empty when all passed) and ``could_not_run=...``
(those of them that could not run) for ``$GITHUB_OUTPUT``.

    python tools/ci/gate_report.py --out OUT --repo vllm-project/vllm \\
        --ref main [--rebase-json OUT/rebase.json] [--run-url URL]
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from rebase_report import document, issue_opening, issue_title, read_result

from vllm_patchkit.errors import EXIT_REFUSED
from vllm_patchkit.judgement import Verdict

TAIL_LINES = 80
TAIL_CHARS = 12_000

# What each check's exit status means, in the words of its documentation.
MEANINGS: dict[str, dict[int, str]] = {
    "precommit": {
        1: (
            "a hook of vLLM's pre-commit **failed** on the rebased series: the "
            "patches need fixing for this upstream"
        ),
        2: "refused (not a vLLM checkout, or the checkout is busy or dirty)",
        3: (
            "**could not judge**: a hook could not be installed or run here "
            "(the package is named in the output); this says nothing about the "
            "patches"
        ),
    },
    # ``test``'s exit is its verdict's (vllm_patchkit.judgement).
    "test": {
        Verdict.NOT_FIXED.exit_code: (
            "**the fix is missing or wrong** on this upstream: the regression "
            "suite ran and failed with the series applied"
        ),
        EXIT_REFUSED: "refused: the path is not a vLLM tree",
        Verdict.CANNOT_JUDGE.exit_code: (
            "**could not run or judge**: the suite could not run, which says "
            "nothing about the fix. `test` runs this vLLM on the venv's torch "
            "(`requirements/constraints.txt`) with the pure-Python packages "
            "its own requirement files add; the output's `runtime:` line says "
            "which torch and extra packages ran it, what it pins and what "
            "could not be provided, and each check that could not run says "
            "why (a module layout the harness does not know yet: teach "
            "`tools/vllm_patchkit/judge/regression/layout.py`, not the patches)"
        ),
    },
    "signoff": {
        1: "a check that `pr` runs failed",
        2: (
            "a fix's pull request was refused: each fix's line below says why "
            "(a commit without its author's DCO `Signed-off-by`, which only the "
            "author can give, or a dirty checkout)"
        ),
        3: (
            "**could not run**: the fixes the checkout carries could not be "
            "listed, or `pr` could not run; this says nothing about the sign-offs"
        ),
    },
}

# The exit statuses by which a check that ran says no; any other non-zero
# status means it could not run (or refused its input): no verdict.
FINDINGS: dict[str, frozenset[int]] = {
    "precommit": frozenset({1}),
    "test": frozenset({Verdict.NOT_FIXED.exit_code}),
    "signoff": frozenset({1, EXIT_REFUSED}),
}

# What a check found, in the issue's first sentence.
FOUND: dict[str, str] = {
    "precommit": "vLLM's pre-commit rejects the rebased series",
    "test": "a fix is missing or wrong on this release",
    "signoff": "a fix's pull request is not ready (below: what is missing)",
}

COMMANDS = {
    "precommit": "vllm-patchkit precommit CHECKOUT",
    "test": "vllm-patchkit test CHECKOUT",
    "signoff": (
        "tools/ci/check-signoffs.sh CHECKOUT: `vllm-patchkit pr CHECKOUT --fix "
        "NAME --dry-run --signoff --no-test --no-precommit` for each fix the "
        "checkout carries"
    ),
}

# check-signoffs.sh's line for each fix's dry run.
SIGNOFF_LINE = re.compile(r"^signoff of [^:\n]+: exit \d+: .*$", re.MULTILINE)


@dataclass(frozen=True)
class Gate:
    name: str
    code: int
    log: Path

    @property
    def meaning(self) -> str:
        known = MEANINGS.get(self.name, {}).get(self.code)
        if known:
            return known
        if self.ran:
            return f"exit status {self.code}"
        return f"**could not run** (exit status {self.code}): no verdict"

    @property
    def ran(self) -> bool:
        """Whether the check ran and said no (else it could not run)."""
        return self.code in FINDINGS.get(self.name, frozenset({1}))

    @property
    def heading(self) -> str:
        said = "failed" if self.ran else "could not run"
        return f"`{self.name}` {said} (exit {self.code})"

    @property
    def cause(self) -> str:
        """What went wrong, for the issue's first sentence."""
        if not self.ran:
            return self.heading
        return f"{self.heading}: {FOUND.get(self.name, 'it failed')}"


def read_gates(out: Path) -> list[Gate]:
    gates = []
    table = out / "gates.tsv"
    if not table.is_file():
        return gates
    for line in table.read_text().splitlines():
        name, _, code = line.partition("\t")
        if not re.fullmatch(r"[a-z0-9-]+", name) or not code.strip().isdigit():
            continue
        gates.append(Gate(name, int(code), out / "gates" / f"{name}.log"))
    return gates


def tail(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no output was kept)"
    lines = text.rstrip().splitlines()[-TAIL_LINES:]
    kept = "\n".join(lines)[-TAIL_CHARS:]
    return kept or "(no output)"


def said_per_fix(gate: Gate) -> list[str]:
    """The sign-off check's line for each fix's PR, as a list; else nothing."""
    if gate.name != "signoff":
        return []
    try:
        lines = SIGNOFF_LINE.findall(gate.log.read_text(errors="replace"))
    except OSError:
        return []
    if not lines:
        return []
    quoted = ["- `" + line.replace("`", "'") + "`" for line in lines]
    return ["What each fix's pull request dry run said:", "", *quoted, ""]


def fenced(text: str) -> str:
    """A code block its content cannot close."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def issue_body(
    failed: list[Gate], passed: list[Gate], repo: str, ref: str, commit: str, run: str
) -> str:
    causes = "; ".join(gate.cause for gate in failed)
    what = f"applied cleanly, but on the rebased checkout {causes}"
    parts = [issue_opening(f"{repo} `{ref}`", commit, what), ""]
    if all(not gate.ran for gate in failed):
        parts += [
            (
                "No check found a problem in the series: the ones above could "
                "not run here, which is no verdict on the patches (fix the "
                "environment or the toolkit, then run the job again)."
            ),
            "",
        ]
    parts += [
        (
            "Exit statuses: **1** means the check ran and found a real problem "
            "(for `test`: the fix is missing or wrong); **3** means it could "
            "not run or judge (an environment problem here, not a verdict on "
            "the patches); **2** means it refused its input (for `signoff`: a "
            "fix's pull request was refused, its line says why)."
        ),
        "",
    ]
    for gate in failed:
        parts += [
            f"### {gate.heading}",
            "",
            f"`{COMMANDS.get(gate.name, gate.name)}`: {gate.meaning}.",
            "",
            *said_per_fix(gate),
            f"Last {TAIL_LINES} lines of its output:",
            "",
            fenced(tail(gate.log)),
            "",
        ]
    if passed:
        parts += ["Passed: " + ", ".join(f"`{g.name}`" for g in passed), ""]
    return document(parts, run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repo", required=True, help="upstream owner/name")
    parser.add_argument("--ref", required=True, help="the upstream ref rebased onto")
    parser.add_argument("--rebase-json", type=Path)
    parser.add_argument("--run-url", default="")
    args = parser.parse_args(argv)

    gates = read_gates(args.out)
    failed = [g for g in gates if g.code != 0]
    passed = [g for g in gates if g.code == 0]
    if failed:
        onto = str(read_result(args.rebase_json).get("onto") or "")
        body = issue_body(failed, passed, args.repo, args.ref, onto, args.run_url)
        title = issue_title(args.repo, args.ref)
        (args.out / "issue-title.txt").write_text(title + "\n")
        (args.out / "issue-body.md").write_text(body)
    print("failed=" + ",".join(g.name for g in failed))
    print("could_not_run=" + ",".join(g.name for g in failed if not g.ran))
    return 0


if __name__ == "__main__":
    sys.exit(main())
