"""A copy of the installed vLLM whose ``rocm_attn.py`` says something else.

Every file is a symlink to the install except the edited one (``rocm_attn.py``
unless told otherwise), which is a real file: put the copy first on
``PYTHONPATH`` and a fresh process
imports the edited module through vLLM's real package. Byte-code caches are
shared by linking the ``__pycache__`` directories (a symlinked source stats
as its target, so its cache stays valid), except the one beside the edited
file, which is a fresh directory: nothing is written into the install.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from vllm_patchkit.trees.installed import installed_vllm_dir

ROCM_ATTN = Path("vllm/v1/attention/backends/rocm_attn.py")
AITER_UNIFIED_ATTN = Path("vllm/v1/attention/backends/rocm_aiter_unified_attn.py")


def shadow_installed_vllm(
    dest: Path, edit: Callable[[str], str], file: Path = ROCM_ATTN
) -> Path:
    """Build the copy under ``dest`` (the PYTHONPATH entry) with ``file``
    (relative to the copy) edited; return the edited file."""
    source = installed_vllm_dir()
    edited = dest / file
    for root, dirs, files in os.walk(source):
        here = Path(root)
        target = dest / "vllm" / here.relative_to(source)
        target.mkdir(parents=True, exist_ok=True)
        if "__pycache__" in dirs:
            dirs.remove("__pycache__")
            if target != edited.parent:
                (target / "__pycache__").symlink_to(here / "__pycache__")
        for name in files:
            if target / name != edited:
                (target / name).symlink_to(here / name)
    original = (source / file.relative_to("vllm")).read_text()
    text = edit(original)
    assert text != original, "the edit changed nothing"
    edited.write_text(text)
    return edited


def insert_before(text: str, anchor: str, new_lines: str) -> str:
    """Insert ``new_lines`` before the one line that ends with ``anchor``."""
    lines = text.splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if line.rstrip().endswith(anchor)]
    assert len(hits) == 1, f"{anchor!r} found {len(hits)} times"
    lines[hits[0] : hits[0]] = [new_lines]
    return "".join(lines)
