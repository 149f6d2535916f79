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
import json
from pathlib import Path

from vllm_patchkit.judge.matrix import Row, unjudged_cells


def _rows(path: Path) -> dict[str, Row]:
    if not path.is_file():
        return {}
    rows = (Row.from_json(r) for r in json.loads(path.read_text())["rows"])
    return {row.version: row for row in rows}


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

    run = json.loads((args.out / "matrix.json").read_text())["run"]
    new = _rows(args.out / "matrix.json")
    old = _rows(args.docs / "matrix.json")
    versions = list(new)
    changed = changes(new, old)
    unjudged = unjudged_cells(list(new.values()))
    span = f"vLLM {versions[0]} to {versions[-1]}"
    title = f"Compatibility matrix: {span} ({len(versions)} releases)"
    by_step = ", ".join(
        f"{k} {v:.0f} s" for k, v in run["compute_seconds_by_step"].items()
    )
    shards = run.get("shards", [])
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
            f"- Step time: {run['compute_seconds']:.0f} s ({by_step}); the slowest "
            f"job's matrix step took {run['seconds']:.0f} s."
        ),
        (
            f"- Code digest {run['digests']['code']}, environment "
            f"{run['digests']['environment']} (every job's)."
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
