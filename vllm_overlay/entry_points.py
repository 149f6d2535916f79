"""Is an entry point registered? Read from the installed metadata's files.

vLLM finds its general plugins with ``importlib.metadata.entry_points``;
this answers the same question (``tests/toolkit/test_entry_points.py``
checks it against importlib.metadata) by reading the ``entry_points.txt``
files itself, because importing importlib.metadata (email, zipfile, csv)
would cost ``vllm-patchkit doctor`` a third of its start-up. The overlay's
doctor and the toolkit's ask here; the overlay depends on nothing, so the
toolkit imports it, never the other way.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from vllm_overlay.tree_files import read_regular

ENTRY_POINT_GROUP = "vllm.general_plugins"
ENTRY_POINT_NAME = "vllm_overlay"
"""The overlay's plugin entry point (pyproject.toml): vLLM loads what it names."""
MAX_ENTRY_POINTS_BYTES = 1 << 20
"""An ``entry_points.txt`` past this is not read (real ones are kilobytes)."""


def entry_point_registered(
    group: str = ENTRY_POINT_GROUP, name: str = ENTRY_POINT_NAME
) -> bool:
    """Whether an installed distribution declares entry point ``name`` in
    ``group``, as ``importlib.metadata`` finds it: the first ``*.dist-info``
    or ``*.egg-info`` of each name on ``sys.path`` wins."""
    seen: set[str] = set()
    for entry in sys.path:
        try:
            children = list(os.scandir(entry or "."))
        except OSError:
            continue
        for child in children:
            stem, dot, suffix = child.name.rpartition(".")
            if not dot or suffix.lower() not in ("dist-info", "egg-info"):
                continue
            distribution = _normalized(stem.partition("-")[0])
            if distribution in seen:
                continue
            seen.add(distribution)
            if name in _entry_point_names(Path(child.path) / "entry_points.txt", group):
                return True
    return False


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _entry_point_names(path: Path, group: str) -> set[str]:
    """The names in ``[group]`` of one ``entry_points.txt`` (INI syntax)."""
    try:
        text = read_regular(path, MAX_ENTRY_POINTS_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError):  # not a regular file, too large too
        return set()
    names, section = set(), None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif section == group and "=" in line:
            names.add(line.partition("=")[0].strip())
    return names
