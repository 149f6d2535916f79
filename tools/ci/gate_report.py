"""Sum up the checks the nightly job ran on the rebased checkout.

``tools/ci/run-gate.sh`` runs each check (``vllm-patchkit precommit``,
``test``, the sign-off dry run), keeps its output in ``OUT/gates/NAME.log``
and appends ``NAME<TAB>EXIT`` to ``OUT/gates.tsv``. This reads them and,
when a check failed, writes the issue the job files or comments on:
``issue-title.txt`` (the same title as a conflict's, one per upstream
repository and ref) and ``issue-body.md`` (which check failed, what its exit
status means, the tail of its output). Prints ``failed=NAME,...`` (empty
when every check passed) for ``$GITHUB_OUTPUT``.

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
            "a commit of the rebased series lacks its author's DCO "
            "`Signed-off-by` (only the author can give it), or the checkout "
            "is dirty"
        ),
        3: "could not run",
    },
}

COMMANDS = {
    "precommit": "vllm-patchkit precommit CHECKOUT",
    "test": "vllm-patchkit test CHECKOUT",
    "signoff": "vllm-patchkit pr CHECKOUT --dry-run --signoff --no-test --no-precommit",
}


@dataclass(frozen=True)
class Gate:
    name: str
    code: int
    log: Path

    @property
    def meaning(self) -> str:
        known = MEANINGS.get(self.name, {}).get(self.code)
        return known or f"exit status {self.code}"


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


def fenced(text: str) -> str:
    """A code block its content cannot close."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def issue_body(
    failed: list[Gate], passed: list[Gate], repo: str, ref: str, commit: str, run: str
) -> str:
    names = ", ".join(f"`{g.name}`" for g in failed)
    what = f"applied cleanly, but a check failed on the rebased checkout: {names}"
    parts = [
        issue_opening(f"{repo} `{ref}`", commit, what),
        "",
        (
            "Exit statuses: **1** means the check ran and found a real problem "
            "(for `test`: the fix is missing or wrong); **3** means it could "
            "not run or judge (an environment problem here, not a verdict on "
            "the patches); **2** means it refused its input."
        ),
        "",
    ]
    for gate in failed:
        parts += [
            f"### `{gate.name}` exited {gate.code}",
            "",
            f"`{COMMANDS.get(gate.name, gate.name)}`: {gate.meaning}.",
            "",
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
        (args.out / "issue-title.txt").write_text(
            issue_title(args.repo, args.ref) + "\n"
        )
        (args.out / "issue-body.md").write_text(
            issue_body(
                failed,
                passed,
                args.repo,
                args.ref,
                str(read_result(args.rebase_json).get("onto") or ""),
                args.run_url,
            )
        )
    print("failed=" + ",".join(g.name for g in failed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
