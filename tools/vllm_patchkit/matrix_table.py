"""The matrix as text: the Markdown table, its notes, and the JSON document.

Separate from :mod:`vllm_patchkit.matrix` because nothing here decides a
cell: a change to the layout never invalidates the cache.
"""

from __future__ import annotations

from typing import Any

from vllm_patchkit.errors import InputError
from vllm_patchkit.matrix import Cell, Row
from vllm_patchkit.paths import PROJECT_ROOT
from vllm_patchkit.regression.verdict import CANNOT_JUDGE

WORDS = {True: "**yes**", False: "no", None: "cannot judge"}


def _cell(text: str) -> str:
    """Table-safe, with this checkout's path left out (the same on any machine)."""
    text = text.replace(f"{PROJECT_ROOT}/", "")
    return text.replace("|", "\\|").replace("\n", " ")


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
        data["overlay"]["text"] = cell_text(row.overlay)
        out.append(data)
    return {"run": run, "rows": out}


def cell_text(cell: Cell) -> str:
    """The cell's text, with the reason of a judgement that could not be made
    where the text lacks it (an overlay probe that could not run)."""
    why = str(cell.detail.get("why") or "")
    if cell.status == CANNOT_JUDGE and why and why not in cell.text:
        return f"{cell.text}: {why}"
    return cell.text


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


def table(rows: list[Row]) -> list[str]:
    """The matrix's main table, one row per release."""
    lines = [
        (
            "| vLLM | #51585 | #53821 | series | stock suite | suite, series applied "
            "| overlay (real plugin loading) | harmful findings (audit) | seconds |"
        ),
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        fixes = row.fixes or {}
        lines.append(
            "| "
            + " | ".join(
                _cell(x)
                for x in (
                    row.version,
                    WORDS[fixes.get("#51585", row.affected)],
                    WORDS[fixes.get("#53821")],
                    row.series,
                    row.stock.text,
                    row.applied.text,
                    cell_text(row.overlay),
                    row.audit.text,
                    timing(row),
                )
            )
            + " |"
        )
    return lines


def markdown(rows: list[Row], run: dict[str, Any]) -> str:
    lines = [*table(rows), "", *run_lines(run), "", *runtime_table(rows)]
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


def run_lines(run: dict[str, Any]) -> list[str]:
    by_step = ", ".join(
        f"{k} {v:.0f} s" for k, v in run["compute_seconds_by_step"].items()
    )
    return [
        (
            f"This run: {run['releases']} releases in {run['seconds']:.0f} s with "
            f"--jobs {run['jobs']} ({run['rows_computed']} rows computed, "
            f"{run['rows_cached']} read from the cache). Computing every cell took "
            f"{run['compute_seconds']:.0f} s of step time ({by_step}); the seconds "
            "column is each row's, per step."
        ),
    ]


def runtime_table(rows: list[Row]) -> list[str]:
    lines = [
        (
            "What ran each release (the venv's torch, beside it the release's "
            "missing pure-Python requirements):"
        ),
        "",
        "| vLLM | pins torch | ran with torch | extra packages | could not provide |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        runtime = row.runtime or {}
        extras = ", ".join(runtime.get("extras") or []) or "none"
        missing = "; ".join(runtime.get("missing") or []) or "none"
        ran = runtime.get("torch") or "unknown (no runtime record)"
        lines.append(
            f"| {row.version} | {row.torch_pin or 'none'} | {_cell(ran)} "
            f"| {_cell(extras)} | {_cell(missing)} |"
        )
    return lines


def not_run_notes(rows: list[Row]) -> list[str]:
    """Checks that could not run, each reason once with the releases it hit
    (in the stock run and the series-applied run alike, unless marked)."""
    where: dict[tuple[str, str], dict[str, set[str]]] = {}
    for row in rows:
        for step, cell in (("stock", row.stock), ("series", row.applied)):
            if step == "series" and cell.detail.get("reused"):
                continue
            for item in (cell.counts or {}).get("not_run", []):
                seen = where.setdefault((item["name"], item["why"]), {})
                seen.setdefault(row.version, set()).add(step)
    if not where:
        return []
    lines = ["", "Checks that could not run (the releases each reason hit):", ""]
    for (name, why), seen in sorted(where.items()):
        versions = [
            version
            + ("" if len(steps) == 2 or _reused(rows, version) else f" ({min(steps)})")
            for version, steps in seen.items()
        ]
        lines.append(f"- {name}: {_cell(why)} ({', '.join(versions)})")
    return lines


def _reused(rows: list[Row], version: str) -> bool:
    """Whether the series cell of ``version`` is the stock run itself."""
    row = next(r for r in rows if r.version == version)
    return bool(row.applied.detail.get("reused"))
