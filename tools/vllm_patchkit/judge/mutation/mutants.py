"""Mutants as edits of a fixed method's statements, and their one edit rule.

A :class:`Mutant` rewrites statements of a fixed method (found by its AST,
so line numbers do not matter) the way a hurried port, a refactor or a
half-understood review comment could. Each fix's own mutants live with its
scenarios (``judge/regression/by_fix/<fix>/mutants.py``) and are made here.
"""

from __future__ import annotations

import argparse
import ast
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vllm_overlay.code import find_method


@dataclass(frozen=True)
class Mutant:
    name: str
    description: str
    edits: tuple[tuple[str, tuple[str, ...]], ...]
    """(statement of the fixed method, the lines that replace it)."""


class MutationError(ValueError):
    """The source does not hold the fixed method this mutant rewrites."""


def method_lines(source: str, cls: str, method: str) -> tuple[int, int]:
    """1-based first and last line of ``cls.method`` in ``source``."""
    found = find_method(ast.parse(source), f"{cls}.{method}")
    if found is None or found.end_lineno is None:
        raise MutationError(f"no {cls}.{method}")
    return found.lineno, found.end_lineno


def edit_method(
    source: str,
    edits: tuple[tuple[str, tuple[str, ...]], ...],
    span: tuple[int, int],
    name: str,
    method: str,
    filename: str = "<mutant>",
) -> str:
    """``source`` with each edit's statement (found once in the method's
    lines ``span``) replaced by its lines, at the statement's indent."""
    lines = source.splitlines(keepends=True)
    first, last = span
    for statement, replacement in edits:
        hits = [i for i in range(first - 1, last) if lines[i].strip() == statement]
        if len(hits) != 1:
            raise MutationError(
                f"{name}: expected one `{statement}` in {method}, found {len(hits)}"
            )
        index = hits[0]
        indent = lines[index][: len(lines[index]) - len(lines[index].lstrip())]
        new = [f"{indent}{line}\n" for line in replacement]
        lines[index : index + 1] = new
        last += len(new) - 1
    mutated = "".join(lines)
    compile(mutated, filename, "exec")
    return mutated


def report_command(
    prog: str,
    description: str,
    run: Callable[[], dict[str, Any]],
    argv: list[str] | None,
) -> int:
    """A fix's own mutant run as a command: its report as text or ``--json``;
    exit 1 when the unmutated baseline fails or a mutant survives."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    report = run()
    if args.json:
        print(json.dumps(report))
    else:
        print(f"baseline failing: {report['baseline_failing'] or 'none'}")
        for entry in report["mutants"]:
            verdict = "killed" if entry["killed"] else "SURVIVED"
            if "not_made" in entry:
                verdict = "NOT MADE"
            checks = ", ".join(entry["failing_checks"])
            print(f"  {verdict:8} {entry['name']}: {checks}")
    survivors = [entry for entry in report["mutants"] if not entry["killed"]]
    return 1 if report["baseline_failing"] or survivors else 0
