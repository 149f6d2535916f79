"""``docs/matrix.md`` is the matrix's own rendering of ``docs/matrix.json``.

The page is generated, never edited: the same rows give the same page
(nothing of the run that computed them, such as its wall time, is on it),
and every release links to its details.
"""

from __future__ import annotations

import json
from dataclasses import replace

from vllm_overlay.fixes import FIXES
from vllm_patchkit.judge.matrix import Row
from vllm_patchkit.paths import PROJECT_ROOT
from vllm_patchkit.present.matrix_table import markdown

DOCS = PROJECT_ROOT / "docs"


def rows() -> list[Row]:
    data = json.loads((DOCS / "matrix.json").read_text())
    return [Row.from_json(row) for row in data["rows"]]


def test_the_page_is_the_rendering_of_the_json() -> None:
    assert (DOCS / "matrix.md").read_text() == markdown(rows()), (
        "docs/matrix.md differs from what `matrix` renders from docs/matrix.json"
    )


def test_a_row_survives_its_json() -> None:
    for row in rows():
        again = Row.from_json(row.to_json())
        assert again == row


def test_each_release_links_to_its_details() -> None:
    page = markdown(rows())
    for row in rows():
        anchor = "vllm-" + row.version.replace(".", "")
        assert f"[{row.version}](#{anchor})" in page
        assert f"### vLLM {row.version}\n" in page


def test_a_cell_reads_the_same_from_any_checkout() -> None:
    """A path inside the checkout that measured it (the venv's torch named
    in an error) is kept relative, so the page renders byte for byte from
    a clone elsewhere (CI's, a shard's)."""
    from vllm_patchkit.judge.matrix import Cell

    where = f"(at {PROJECT_ROOT}/.venv/lib/torch/cuda/__init__.py:522)"
    cell = Cell("cannot judge", f"cannot judge: {where}", detail={"why": where})
    assert cell.text == "cannot judge: (at .venv/lib/torch/cuda/__init__.py:522)"
    assert cell.detail["why"] == "(at .venv/lib/torch/cuda/__init__.py:522)"
    assert str(PROJECT_ROOT) not in (DOCS / "matrix.json").read_text()


def test_the_fix_columns_are_the_fixes_the_rows_judged() -> None:
    """A sweep that predates a fix gets no column for it (the registry's
    fixes are not all in docs/matrix.json's rows); a row of a mixed sweep
    that did not judge a shown fix says so rather than "cannot judge"."""
    old = rows()
    judged = {label for row in old for label in row.fixes}
    page = markdown(old)
    head = next(line for line in page.splitlines() if line.startswith("| vLLM |"))
    for fix in FIXES:
        assert (f" {fix.pr} |" in head) == (fix.pr in judged), fix.pr
    newer = replace(old[0], fixes={**old[0].fixes, "#99999": True})
    mixed = markdown([newer, *old[1:]])
    assert "| #99999 |" in mixed
    lines = [line for line in mixed.splitlines() if line.startswith("| [")]
    assert "| **yes** |" in lines[0]
    assert all("| not judged |" in line for line in lines[1:])
