"""What a reviewer needs beyond the commit messages, per fix: the PR's Details.

vLLM's commit messages stay a few short paragraphs (what breaks, who reads
it, the fix); the reasoning a reviewer checks the change against (every
reader of what it touches, why this design and not the simpler one, what
stock does on the paths the test drives) goes in the PR body's Details. A
fix keeps its notes in a module of its own folder (``NOTES``, named by
:attr:`Fix.review <vllm_overlay.fixes.base.Fix.review>`); a fix without
notes gets its commit messages there instead.
"""

from __future__ import annotations

import importlib

from vllm_overlay.fixes import by_name


def notes_for(fix: str | None) -> str | None:
    """The fix's reviewer notes, or None (the commit messages stand in)."""
    if fix is None:
        return None
    module = by_name(fix).review
    return importlib.import_module(module).NOTES if module else None
