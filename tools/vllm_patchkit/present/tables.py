"""The toolkit's two table shapes: Markdown for pages and CI, text for a terminal.

Every table the toolkit prints is made here, so a row looks the same everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

_ONE_LINE = {c: " " for c in (*range(32), 127, 0x85, 0x2028, 0x2029)}
"""Control characters and line separators: a space each, so nothing starts a line."""
_MARKDOWN = str.maketrans(
    {
        "\\": "\\\\",
        "|": "\\|",
        "`": "\\`",
        "[": "\\[",
        "]": "\\]",
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        **{chr(c): text for c, text in _ONE_LINE.items()},
    }
)


def markdown_cell(text: str) -> str:
    """Our own Markdown (help texts, which may hold code spans) as a table
    cell: it cannot end its cell or its row early. Text from elsewhere goes
    through :func:`markdown_text`."""
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_text(text: str) -> str:
    """``text`` as inline Markdown that reads as the text itself, wherever it
    goes (a table cell, a heading, a list item, a pull request's body): one
    line (every control character a space), no cell or row ended early, no
    code span closed or opened, no link, no HTML (mkdocs and GitHub pass raw
    HTML through). The one escape every renderer uses for what it did not
    write itself."""
    return text.translate(_MARKDOWN)


def markdown_code(text: str) -> str:
    """``text`` as a Markdown code span: fenced with more backticks than any
    run inside it, so a backtick in ``text`` cannot end the span; one line."""
    flat = text.translate(_ONE_LINE)
    fence = "`" * (max(map(len, re.findall("`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def markdown_table(heads: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A Markdown table's lines; cells are written as given (escape with
    :func:`markdown_text` what this code did not write)."""
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
