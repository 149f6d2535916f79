"""The texts of the matrix workflow's pull request, from the merged table.

Reads ``OUT/matrix.json`` (what ``vllm-patchkit matrix --merge`` wrote) and
the checkout's ``docs/matrix.json``, and writes ``OUT/pr-title.txt``,
``OUT/pr-body.md`` and ``OUT/commit-message.txt``: the range, the releases
whose cells changed (by step), the cells that could not be judged, and the
step time the run took. Prints ``changed=true|false`` for ``$GITHUB_OUTPUT``:
false when every row is the one docs/ has (the wall time alone changes
nothing).

    python tools/ci/matrix_report.py --out OUT --docs docs --run-url URL
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vllm_patchkit.errors import EXIT_REFUSED, InputError
from vllm_patchkit.judge.matrix import Row, unjudged_cells
from vllm_patchkit.present.row_schema import read_table
from vllm_patchkit.present.tables import markdown_text


def _rows(path: Path) -> dict[str, Row]:
    """The rows of a matrix.json, every field checked (row_schema)."""
    if not path.exists():
        return {}
    return {row.version: row for row in read_table(path)[0]}


def changes(new: dict[str, Row], old: dict[str, Row]) -> list[str]:
    """``VERSION (steps)`` for each row whose cells differ from docs/'s."""
    out = []
    for version, row in new.items():
        before = old.get(version)
        if before is None:
            out.append(f"{version} (new)")
            continue
        steps = [
            step
            for step, cell in row.cells.items()
            if (cell.status, cell.text)
            != (before.cells[step].status, before.cells[step].text)
        ]
        if (row.series, row.fixes) != (before.series, before.fixes):
            steps.insert(0, "static")
        if steps:
            out.append(f"{version} ({', '.join(steps)})")
    out += [f"{v} (gone)" for v in old if v not in new]
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--docs", type=Path, required=True)
    parser.add_argument("--run-url", default="")
    args = parser.parse_args()
    try:
        return report(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_REFUSED


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def report(args: argparse.Namespace) -> int:
    """Write the three texts; every string from the rows escaped (the body
    is Markdown, and the commit message holds it)."""
    rows, run = read_table(args.out / "matrix.json")
    new = {row.version: row for row in rows}
    old = _rows(args.docs / "matrix.json")
    versions = [markdown_text(v) for v in new]
    changed = [markdown_text(c) for c in changes(new, old)]
    unjudged = [markdown_text(c) for c in unjudged_cells(list(new.values()))]
    span = f"vLLM {versions[0]} to {versions[-1]}"
    title = f"Compatibility matrix: {span} ({len(versions)} releases)"
    steps = run.get("compute_seconds_by_step")
    by_step = ", ".join(
        f"{markdown_text(str(k))} {_number(v):.0f} s"
        for k, v in (steps.items() if isinstance(steps, dict) else ())
    )
    shards = run.get("shards")
    shards = shards if isinstance(shards, list) else []
    digests = run.get("digests")
    digests = digests if isinstance(digests, dict) else {}
    lines = [
        (
            f"`vllm-patchkit matrix --merge` of {len(shards)} jobs, one per release, "
            f"regenerated `docs/matrix.md` and `docs/matrix.json` for {span}."
        ),
        "",
        f"- Rows that changed: {', '.join(changed) or 'none'}.",
        (
            f"- Cells that could not be judged (each says why): "
            f"{', '.join(unjudged) or 'none'}."
        ),
        (
            f"- Step time: {_number(run.get('compute_seconds')):.0f} s ({by_step}); "
            f"the slowest job's matrix step took {_number(run['seconds']):.0f} s."
        ),
        (
            f"- Code digest {markdown_text(str(digests.get('code')))}, environment "
            f"{markdown_text(str(digests.get('environment')))} (every job's)."
        ),
    ]
    if args.run_url:
        lines += ["", f"Run: {args.run_url}"]
    body = "\n".join(lines) + "\n"
    (args.out / "pr-title.txt").write_text(title + "\n")
    (args.out / "pr-body.md").write_text(body)
    message = f"docs: the matrix measured on {span}\n\n{body}"
    (args.out / "commit-message.txt").write_text(message)
    print(f"changed={'true' if changed else 'false'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
