"""The Markdown step summary of a rebase, for CI."""

from __future__ import annotations

from vllm_patchkit.git.rebase import RebaseResult
from vllm_patchkit.present.tables import markdown_cell, markdown_table


def markdown_summary(result: RebaseResult, onto: str) -> str:
    """A step summary for CI: one table row per patch."""
    rows = []
    for patch in [*result.patches, *result.commits]:
        detail = markdown_cell(patch.detail)
        if patch.hunks:
            detail += " (hunks: " + ", ".join(patch.hunks) + ")"
        name = patch.name.replace("`", "'")
        rows.append((f"`{name}`", patch.status, detail))
    heading = f"## vllm-patchkit rebase onto `{onto}`: {result.status}"
    lines = [heading, "", result.message, ""]
    lines += markdown_table(("patch", "result", "detail"), rows)
    return "\n".join(lines) + "\n"
