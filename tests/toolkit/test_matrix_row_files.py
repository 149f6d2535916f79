"""``matrix --merge`` takes row files as data from jobs that ran release code.

Every field is checked in one place (:mod:`vllm_patchkit.present.row_schema`)
and a malformed file is refused with exit 2 naming the file and the field,
no traceback; the file itself must be a regular file under a size cap
(a FIFO is refused at once). What passes is free text, and every renderer
escapes it: the page mkdocs publishes, the pull request's body and the bot's
commit message hold no HTML, no link, no broken code span, no injected line.
Cheap: two rows of ``docs/matrix.json``, merged through ``cli.main`` in this
process; the FIFO and the merge job's script in subprocesses.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import markdown
import pytest

from tests.toolkit.matrix_helpers import row_file_data
from vllm_patchkit import cli
from vllm_patchkit.paths import PROJECT_ROOT
from vllm_patchkit.present.row_schema import MAX_BYTES
from vllm_patchkit.present.tables import markdown_text

DOCS_ROWS = json.loads((PROJECT_ROOT / "docs/matrix.json").read_text())["rows"]
RELEASES = ["0.28.0", "0.29.0"]
CI = PROJECT_ROOT / "tools/ci"
SITE_EXTENSIONS = ["admonition", "attr_list", "tables", "toc", "pymdownx.superfences"]
"""mkdocs.yml's Markdown extensions: the page rendered as the site renders it."""


def row_file() -> dict[str, Any]:
    """A well-formed row file: docs/'s rows of 0.28.0 and 0.29.0."""
    rows = [copy.deepcopy(r) for r in DOCS_ROWS if r["version"] in RELEASES]
    return row_file_data(rows, RELEASES, seconds=1.0)


def write(tmp_path: Path, data: Any, name: str = "matrix-rows.json") -> Path:
    path = tmp_path / "rows" / "job" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=1))
    return path


def merge(path: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """``vllm-patchkit matrix --merge PATH`` in this process (no start-up to
    pay), through ``cli.main``: the one path from an error to its exit code."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    argv = ["matrix", "--merge", str(path), "--output-dir", str(out)]
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = cli.main(argv)
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    return subprocess.CompletedProcess(argv, code, stdout.getvalue(), stderr.getvalue())


def report(out: Path, docs: Path) -> subprocess.CompletedProcess[str]:
    """tools/ci/matrix_report.py: the pull request's texts from out/matrix.json."""
    return subprocess.run(
        [sys.executable, str(CI / "matrix_report.py"), "--out", str(out)]
        + ["--docs", str(docs), "--run-url", "run-42"],
        capture_output=True,
        text=True,
        timeout=300,
    )


def assert_refused(proc: subprocess.CompletedProcess[str], *named: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    for text in named:
        assert text in proc.stderr, (text, proc.stderr)
    assert "Traceback" not in proc.stderr and "unexpected" not in proc.stderr


# --------------------------------------------------------- what is rendered

HOSTILE = [
    "0.28.0\n\n<img src=x onerror=alert(1)>",
    "<script>alert(document.cookie)</script>",
    "[click](javascript:alert(1))",
    "<javascript:alert(1)>",
    "ends a span` <b>bold</b> `opens one",
    "a | b\n| --- |\n| fake row |",
    "line one\n\n## Injected heading\n- [x] injected",
    "cr\rinjected\u2028separator\u0085next",
    "&lt;script&gt; already escaped",
    "trailing backslash \\",
]


def _put(data: dict[str, Any], text: str) -> None:
    """``text`` in every free-text field of the first row that reaches the page."""
    row = data["rows"][0]
    row["series"] = row["overlay_plan"] = text
    row["torch_pin"] = text
    row["runtime"]["torch"] = text
    row["runtime"]["missing"] = [text]
    row["runtime"]["extras"] = [text]
    for step in ("stock", "applied", "overlay", "audit"):
        row[step]["text"] = text
    row["audit"]["status"] = "harmful"
    row["stock"]["counts"]["not_run"] = [{"name": text, "why": text}]
    row["applied"]["counts"]["not_run"] = [{"name": text, "why": "x " + text}]


def _fences(text: str) -> int:
    """The backticks that open or close a code span (the unescaped ones)."""
    return len(re.findall(r"(?<!\\)`", text))


@pytest.fixture(scope="module")
def clean_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The page the well-formed rows give."""
    root = tmp_path_factory.mktemp("clean")
    proc = merge(write(root, row_file()), root / "out")
    assert proc.returncode in (0, 3), proc.stderr
    return (root / "out" / "matrix.md").read_text()


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_strings_render_as_text(
    tmp_path: Path, text: str, clean_page: str
) -> None:
    before = clean_page
    data = row_file()
    _put(data, text)
    out = tmp_path / "out"
    proc = merge(write(tmp_path, data), out)
    assert proc.returncode in (0, 3), proc.stderr
    texts = report(out, PROJECT_ROOT / "docs")
    assert texts.returncode == 0, texts.stderr

    page = (out / "matrix.md").read_text()
    # The lines and code spans the clean rows give: nothing started a line,
    # closed a span or opened one.
    assert page.count("\n") == before.count("\n")
    assert _fences(page) == _fences(before)
    assert "<" not in page and ">" not in page
    html = markdown.markdown(page, extensions=SITE_EXTENSIONS)
    assert not re.search(r"<(img|script|b)\b", html)
    hrefs = re.findall(r'href="([^"]*)"', html)
    assert not [h for h in hrefs if not h.startswith("#")], hrefs
    assert "Injected heading</h2>" not in html and "fake row</td>" not in html
    # The escaped text reads as the text itself (one line).
    assert markdown_text(text) in page
    for name in ("pr-body.md", "commit-message.txt"):
        body = (out / name).read_text()
        assert "<" not in body and text.splitlines()[-1] not in body


@pytest.mark.parametrize("text", HOSTILE)
def test_the_one_escape_leaves_no_markup(text: str) -> None:
    escaped = markdown_text(text)
    assert "\n" not in escaped and "\r" not in escaped and "<" not in escaped
    assert _fences(escaped) == 0
    html = markdown.markdown(f"- {escaped}")
    assert html.count("<") == 4  # <ul>, <li>, </li>, </ul>: nothing else


# ------------------------------------------------------- what is refused


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["rows"][0].pop(key)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = data
        for key in parents:
            target = target[int(key)] if key.isdigit() else target[key]
        target[int(last) if last.isdigit() else last] = value

    return change


MALFORMED = {
    "row not an object": (_set("rows.0", 5), "rows[0]: an object"),
    "no version": (_drop("version"), "rows[0].version"),
    "no stock": (_drop("stock"), "rows[0].stock"),
    "integer version": (_set("rows.0.version", 28), "rows[0].version"),
    "hostile version": (
        _set("rows.0.version", HOSTILE[0]),
        "rows[0].version: a vLLM release",
    ),
    "version with a newline": (_set("rows.0.version", "0.28.0\n"), "rows[0].version"),
    "seconds a string": (_set("rows.0.stock.seconds", "5"), "rows[0].stock.seconds"),
    "seconds negative": (_set("rows.0.static_seconds", -1), "rows[0].static_seconds"),
    "status a list": (_set("rows.0.stock.status", ["x"]), "rows[0].stock.status"),
    "status markup": (_set("rows.0.audit.status", "<b>"), "rows[0].audit.status"),
    "fake fix label": (
        _set("rows.0.fixes", {"#1 <b>": True}),
        "rows[0].fixes: fix labels of the registry",
    ),
    "commit breaks a code span": (
        _set("rows.0.commit", "`<script>`"),
        "rows[0].commit",
    ),
    "not_run name a number": (
        _set("rows.0.stock.counts.not_run", [{"name": 1, "why": "x"}]),
        "rows[0].stock.counts.not_run[0].name",
    ),
    "runtime extras not strings": (
        _set("rows.0.runtime.extras", [{"a": 1}]),
        "rows[0].runtime.extras[0]",
    ),
    "a lone surrogate": (_set("rows.0.series", "\ud800"), "rows[0].series"),
    "a field no row has": (_set("rows.0.sneaky", "x"), "rows[0].sneaky"),
    "empty digests": (_set("digests", {}), "digests.code"),
    "release named three times": (
        _set("releases", ["0.28.0", "0.28.0", "0.28.0", "0.29.0"]),
        "releases: each release once",
    ),
    "a release that is not one": (
        _set("releases", ["0.28.0", "<img>"]),
        "releases[1]",
    ),
    "no rows": (_set("rows", []), "rows: at least one row"),
    "an unknown step": (_set("steps", ["stock", "<b>"]), "steps[1]"),
    "jobs a string": (_set("run.jobs", "1"), "run.jobs"),
}


@pytest.mark.parametrize("case", MALFORMED, ids=list(MALFORMED))
def test_a_malformed_row_file_is_refused_naming_the_field(
    tmp_path: Path, case: str
) -> None:
    change, field = MALFORMED[case]
    data = row_file()
    change(data)
    path = write(tmp_path, data)
    out = tmp_path / "out"
    assert_refused(merge(path, out), str(path), field)
    assert not (out / "matrix.md").exists()


def test_duplicate_keys_and_an_empty_file_are_refused(tmp_path: Path) -> None:
    text = json.dumps(row_file())
    twice = text.replace('"format":', '"steps": [], "format":', 1)
    path = write(tmp_path, twice)
    assert_refused(merge(path, tmp_path / "out"), str(path), "'steps' given twice")
    for empty in ("", "\n  \n"):
        path = write(tmp_path, empty)
        assert_refused(merge(path, tmp_path / "out"), str(path), "empty")


def test_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    """A FIFO with no writer: opened without blocking, and refused."""
    path = tmp_path / "rows" / "matrix-rows.json"
    path.parent.mkdir()
    os.mkfifo(path)
    proc = subprocess.run(
        [sys.executable, "-m", "vllm_patchkit", "matrix", "--merge", str(path)]
        + ["--output-dir", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert_refused(proc, str(path), "a FIFO")


def test_a_file_over_the_cap_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    """A well-formed row file padded past the cap (a field the reader would
    drop): refused by its size, from the open file's status."""
    data = row_file()
    data["rows"][0]["detail_padding"] = "x" * MAX_BYTES
    path = write(tmp_path, data)
    size = path.stat().st_size
    assert_refused(merge(path, tmp_path / "out"), f"{path}: {size} bytes, more than")


# ------------------------------------------------- the merge job's script


def test_the_merge_job_fails_closed_on_a_malformed_row_file(tmp_path: Path) -> None:
    """matrix-merge.sh passed exit 3 on, and matrix_report.py then crashed."""
    data = row_file()
    data["rows"][0]["stock"]["seconds"] = "5"
    path = write(tmp_path, data)
    out = tmp_path / "out"
    bin_dir = Path(sys.executable).parent
    proc = subprocess.run(
        ["bash", str(CI / "matrix-merge.sh"), str(path.parents[1]), str(out)]
        + [str(PROJECT_ROOT / "docs")],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
        timeout=300,
    )
    assert_refused(proc, str(path), "rows[0].stock.seconds")
    assert not (out / "pr-body.md").exists()
    assert not (out / "commit-message.txt").exists()


def test_matrix_report_refuses_a_malformed_table(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "matrix.json").write_text(json.dumps({"run": {}, "rows": [{"v": 1}]}))
    proc = report(out, PROJECT_ROOT / "docs")
    assert_refused(proc, str(out / "matrix.json"), "rows[0]")
    assert not (out / "pr-body.md").exists()
