"""The toolkit's two table shapes: Markdown for pages and CI, text for a terminal.

Every table the toolkit prints is made here, so a row looks the same everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def markdown_cell(text: str) -> str:
    """Text that cannot end its cell or its row early."""
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(heads: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A Markdown table's lines; cells are written as given (escape with
    :func:`markdown_cell` what may hold ``|``)."""
    return [
        "| " + " | ".join(row) + " |" for row in (heads, ["---"] * len(heads), *rows)
    ]


def text_table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Columns padded to their widest cell, two spaces apart, no trailing blanks."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.ljust(width) for cell, width in zip(row, widths, strict=True)
        ).rstrip()
        for row in rows
    ]
