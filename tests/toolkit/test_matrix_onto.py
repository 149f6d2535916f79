"""``matrix --merge ROWS --onto docs/matrix.json``: a release joins the table.

A new release (0.34.0) needs its row in the committed table without a sweep
of every release: the row files measured say what they measured, the
table's other rows stay as their run measured them, and matrix.json's run
names the rows kept. Cheap: rows of ``docs/matrix.json``, merged through
``cli.main`` in this process.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import signal
from pathlib import Path
from typing import Any

from tests.toolkit.matrix_helpers import row_file_data
from vllm_patchkit import cli
from vllm_patchkit.paths import PROJECT_ROOT

DOCS = json.loads((PROJECT_ROOT / "docs/matrix.json").read_text())
OLD, MIDDLE, NEW = "0.27.1", "0.28.0", "0.29.0"


def _row(version: str, like: str) -> dict[str, Any]:
    row = copy.deepcopy(next(r for r in DOCS["rows"] if r["version"] == like))
    row["version"] = version
    return row


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))
    return path


def _row_file(tmp_path: Path, rows: list[dict[str, Any]], releases: list[str]) -> Path:
    data = row_file_data(rows, releases, seconds=7.0)
    return _write(tmp_path / "rows" / "matrix-rows.json", data)


def _table(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    run = {"seconds": 3.0, "jobs": 2}
    return _write(tmp_path / "docs" / "matrix.json", {"run": run, "rows": rows})


def _matrix(*argv: str) -> tuple[int, str]:
    """``vllm-patchkit matrix ARGV`` through ``cli.main``: its exit and stderr."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    stderr = io.StringIO()
    try:
        with (
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(stderr),
        ):
            code = cli.main(["matrix", *argv])
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    return code, stderr.getvalue()


def test_a_new_release_joins_the_table_and_the_run_names_the_rows_kept(
    tmp_path: Path,
) -> None:
    table = _table(tmp_path, [_row(OLD, OLD), _row(MIDDLE, MIDDLE)])
    measured = [_row(MIDDLE, NEW), _row(NEW, NEW)]
    rows = _row_file(tmp_path, measured, [OLD, MIDDLE, NEW])
    out = tmp_path / "out"

    code, err = _matrix(
        "--merge", str(rows), "--onto", str(table), "--output-dir", str(out)
    )

    assert code in (0, 3), err
    merged = json.loads((out / "matrix.json").read_text())
    assert [r["version"] for r in merged["rows"]] == [OLD, MIDDLE, NEW]
    # The row file's row of a release the table had replaces it.
    assert merged["rows"][1]["commit"] == _row(MIDDLE, NEW)["commit"]
    assert merged["rows"][0]["commit"] == _row(OLD, OLD)["commit"]
    assert merged["run"]["kept"]["releases"] == [OLD]
    assert merged["run"]["kept"]["from"] == "matrix.json"
    assert f"[{NEW}](#vllm-{NEW.replace('.', '')})" in (out / "matrix.md").read_text()


def test_without_onto_the_same_row_file_is_a_gap(tmp_path: Path) -> None:
    rows = _row_file(tmp_path, [_row(NEW, NEW)], [OLD, NEW])

    code, err = _matrix("--merge", str(rows), "--output-dir", str(tmp_path / "out"))

    assert code == 2 and f"gap: no row file has {OLD}" in err, err


def test_a_table_row_outside_the_range_is_refused(tmp_path: Path) -> None:
    table = _table(tmp_path, [_row(OLD, OLD), _row(MIDDLE, MIDDLE)])
    rows = _row_file(tmp_path, [_row(NEW, NEW)], [MIDDLE, NEW])

    code, err = _matrix(
        "--merge", str(rows), "--onto", str(table), "--output-dir", str(tmp_path / "o")
    )

    assert code == 2 and f"--onto {table}: {OLD} not in" in err, err
    assert not (tmp_path / "o" / "matrix.json").exists()


def test_onto_without_merge_is_refused_before_anything_runs(tmp_path: Path) -> None:
    table = _table(tmp_path, [_row(OLD, OLD)])

    code, err = _matrix("--onto", str(table), "--no-suite", "--from", OLD, "--to", OLD)

    assert code == 2 and "--onto takes the table" in err, err
