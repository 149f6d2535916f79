"""``docs/matrix.md`` is the matrix's own rendering of ``docs/matrix.json``.

The page is generated, never edited: the same rows give the same page
(nothing of the run that computed them, such as its wall time, is on it),
and every release links to its details.
"""

from __future__ import annotations

import json

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
