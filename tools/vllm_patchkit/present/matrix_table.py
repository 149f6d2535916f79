"""The matrix as text: the Markdown table, its notes, and the JSON document.

Separate from :mod:`vllm_patchkit.judge.matrix` because nothing here decides a
cell: a change to the layout never invalidates the cache.
"""

from __future__ import annotations

from typing import Any

from vllm_overlay.fixes import FIXES
from vllm_patchkit.errors import InputError
from vllm_patchkit.judge.matrix import Cell, Row
from vllm_patchkit.judgement import Verdict
from vllm_patchkit.paths import relative_to_checkout
from vllm_patchkit.present.tables import markdown_code, markdown_table, markdown_text

WORDS = {True: "**yes**", False: "no", None: Verdict.CANNOT_JUDGE.words}
NOT_JUDGED = "not judged"
"""A row's word for a fix its sweep did not read (the sweep predates it)."""


def fix_columns(rows: list[Row]) -> tuple[str, ...]:
    """One column per fix the rows judged, headed by its PR, in registry
    order: a sweep that predates a fix gets no column for it, rather than
    one claiming what it never measured."""
    judged = {label for row in rows for label in row.fixes}
    known = [fix.pr for fix in FIXES if fix.pr in judged]
    return (*known, *sorted(judged - set(known)))


STEP_COLUMNS = ("series", "stock suite", "series applied", "overlay", "audit")


def _cell(text: str) -> str:
    """Escaped (:func:`markdown_text`: row files are data), with this
    checkout's path left out (the same on any machine)."""
    return markdown_text(relative_to_checkout(text))


def summary(rows: list[Row], seconds: float, jobs: int) -> dict[str, Any]:
    """This run's time, and what computing every row cost when it was computed."""
    steps: dict[str, float] = {"static": sum(r.static_seconds for r in rows)}
    for row in rows:
        for name, cell in row.cells.items():
            steps[name] = steps.get(name, 0.0) + cell.seconds
    computed = sum(1 for r in rows if not r.cached)
    return {
        "seconds": round(seconds, 1),
        "jobs": jobs,
        "releases": len(rows),
        "rows_computed": computed,
        "rows_cached": len(rows) - computed,
        "cells_cached": sum(c.cached for r in rows for c in r.cells.values()),
        "compute_seconds": round(sum(steps.values()), 1),
        "compute_seconds_by_step": {k: round(v, 1) for k, v in steps.items()},
    }


AUDIT_FINDING_KEYS = ("file", "line", "field", "method", "operation", "kind")


def to_json(rows: list[Row], run: dict[str, Any]) -> dict[str, Any]:
    """The document: every cell with what it rests on, without the bulk
    (the audit's per-check list and the overlay's log stay in the cache)."""
    out = []
    for row in rows:
        data = row.to_json()
        audit = data["audit"]["detail"]
        if audit.get("findings") is not None:
            data["audit"]["detail"] = {
                "verdict": audit.get("verdict"),
                "counts": audit.get("counts"),
                "findings": [
                    {
                        **{k: f.get(k) for k in AUDIT_FINDING_KEYS},
                        "victims": f.get("victims", []),
                    }
                    for f in audit["findings"]
                ],
            }
        data["overlay"]["detail"].pop("log", None)
        out.append(data)
    return {"run": run, "rows": out}


README_START = "<!-- vllm-patchkit matrix: table start -->"
README_END = "<!-- vllm-patchkit matrix: table end -->"


def with_table(readme: str, rows: list[Row]) -> str:
    """``readme`` with the text between its matrix markers replaced by the table.

    A README without both markers, in order, is refused: the table goes only
    where its owner put it.
    """
    start, end = readme.find(README_START), readme.find(README_END)
    if start < 0 or end < start:
        raise InputError(
            f"the README has no '{README_START}' ... '{README_END}' block for the table"
        )
    head = readme[: start + len(README_START)]
    return head + "\n" + "\n".join(table(rows)) + "\n" + readme[end:]


LEGEND_TEMPLATE = """\
Each release's source tree, run with this project's torch (what else it
needed is under "What ran each release"). Column words:

- {fixes}: does the release need that fix (read from its code).
- **series**: each patch's state on the release (`applies`, `upstreamed`,
  `not-carried`, `conflict`), in series order (a row of an older sweep has
  the states of the series it measured).
- **stock suite**, **series applied**: the regression suite on the stock tree
  and on a clone with the series applied: `bug` (a fix's bug reproduced: the
  details name the fix), `passes`, `fails`, `cannot judge`, `cannot run`; the
  number of checks that ran. `reused`: the series changes nothing the suite
  imports, so the stock run stands for it.
- **overlay**: the overlay loaded by vLLM's own plugin loader, without and
  with it, on the core scenarios of every fix whose code the release has,
  each fix judged apart (its part follows the cell in the details): `fixes`
  (each fix the release needs: bug without, passes with, installed),
  `inert` (no fix needed, none installed, each fix's checks the same both
  ways), `fails`, `cannot judge`; the cell is the worst part. A row whose
  details give no part per fix was measured before the probe judged every
  fix: it rests on {first}'s scenario (and the fixes built on it) only.
- **audit**: harmful shared-metadata writes the audit found (`none`, `N
  harmful`, `cannot judge`).
- **seconds**: what computing the row took, per step in the details.

A release's details (every cell's full text, what it rests on) follow the
table; `matrix.json` has every count and reason.
"""


def legend(rows: list[Row]) -> str:
    """The column words, naming the fix columns these rows have."""
    fixes = ", ".join(f"**{_cell(label)}**" for label in fix_columns(rows))
    return LEGEND_TEMPLATE.format(fixes=fixes, first=_cell(FIXES[0].pr))


SHORT = {"bug reproduced": "bug"}


def _short(cell: Cell) -> str:
    """A cell's verdict word, with the number of checks it rests on."""
    word = SHORT.get(cell.status, cell.status.replace("-", " "))
    if cell.status == "harmful":
        word = cell.text.split(":", 1)[0]
    ran = (cell.counts or {}).get("ran")
    if cell.detail.get("reused"):
        word += ", reused"
    elif ran is not None and cell.status not in ("harmful", "none"):
        word += f" ({ran} ran)"
    return word


def _anchor(version: str) -> str:
    """The heading slug of a release's details, as mkdocs and GitHub make it."""
    return "vllm-" + version.replace(".", "")


def table(rows: list[Row]) -> list[str]:
    """The matrix's main table, one row per release, one word a cell."""
    columns = fix_columns(rows)
    heads = ("vLLM", *map(_cell, columns), *STEP_COLUMNS, "seconds")
    return markdown_table(heads, (_main_row(row, columns) for row in rows))


def _main_row(row: Row, columns: tuple[str, ...]) -> tuple[str, ...]:
    return (
        f"[{_cell(row.version)}](#{_cell(_anchor(row.version))})",
        *(
            WORDS[row.fixes[label]] if label in row.fixes else NOT_JUDGED
            for label in columns
        ),
        _cell(row.series),
        *(_cell(_short(cell)) for cell in row.cells.values()),
        f"{row.cost:.0f}",
    )


def details(rows: list[Row]) -> list[str]:
    """Per release, every cell's full text and the seconds per step."""
    lines = ["## Details", ""]
    for row in rows:
        lines += [f"### vLLM {_cell(row.version)}", ""]
        lines.append(
            f"- commit: {markdown_code(row.commit)}; "
            f"overlay plan: {_cell(row.overlay_plan)}"
        )
        for name, cell in row.cells.items():
            lines.append(f"- {name}: {_cell(cell.text)}")
        lines += [f"- seconds: {timing(row)}", ""]
    return lines


def markdown(rows: list[Row]) -> str:
    """The page: a pure function of the rows (this run's wall time and cache
    use go to the JSON only), so the same rows give the same page however
    they were computed."""
    lines = ["# vLLM releases: the bug, the series, the overlay, the audit", ""]
    lines += [legend(rows), *table(rows), "", *details(rows), *runtime_table(rows)]
    lines += not_run_notes(rows)
    return "\n".join(lines) + "\n"


def timing(row: Row) -> str:
    parts = [
        f"{name} {cell.seconds:.0f}"
        for name, cell in row.cells.items()
        if cell.status != "skipped" and (cell.seconds or not cell.cached)
    ]
    total = f"{row.cost:.0f}"
    return total + (f" ({', '.join(parts)})" if parts else "")


RUNTIME_HEADS = (
    "vLLM",
    "pins torch",
    "ran with torch",
    "extra packages",
    "could not provide",
)


def runtime_table(rows: list[Row]) -> list[str]:
    cells = []
    for row in rows:
        runtime = row.runtime or {}
        extras = ", ".join(runtime.get("extras") or []) or "none"
        missing = "; ".join(runtime.get("missing") or []) or "none"
        ran = runtime.get("torch") or "unknown (no runtime record)"
        pin = row.torch_pin or "none"
        cells.append(tuple(map(_cell, (row.version, pin, ran, extras, missing))))
    return [
        "## What ran each release",
        "",
        "The venv's torch, beside it the release's missing pure-Python requirements:",
        "",
        *markdown_table(RUNTIME_HEADS, cells),
    ]


def not_run_notes(rows: list[Row]) -> list[str]:
    """Checks that could not run, each reason once with the releases it hit
    (in the stock run and the series-applied run alike, unless marked)."""
    where: dict[tuple[str, str], dict[str, set[str]]] = {}
    for row in rows:
        # A reused series cell is the stock run itself: its checks hit both.
        if row.applied.detail.get("reused"):
            runs = [(row.stock, {"stock", "series"})]
        else:
            runs = [(row.stock, {"stock"}), (row.applied, {"series"})]
        for cell, steps in runs:
            for item in (cell.counts or {}).get("not_run", []):
                seen = where.setdefault((item["name"], item["why"]), {})
                seen.setdefault(row.version, set()).update(steps)
    if not where:
        return []
    lines = [
        "",
        "## Checks that could not run",
        "",
        "Each reason, with the releases it hit:",
        "",
    ]
    for (name, why), seen in sorted(where.items()):
        versions = [
            _cell(version) + ("" if len(steps) == 2 else f" ({min(steps)})")
            for version, steps in seen.items()
        ]
        lines.append(f"- {_cell(name)}: {_cell(why)} ({', '.join(versions)})")
    return lines
