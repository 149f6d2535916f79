"""Where the project's own files and its caches live."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
"""The vllm-overlay checkout this package runs from (editable install)."""

PATCHES_DIR = PROJECT_ROOT / "patches"


def cache_dir() -> Path:
    """Downloads and release trees, shared by every checkout of the project.

    ``VLLM_OVERLAY_CACHE`` overrides; otherwise the XDG cache directory.
    """
    override = os.environ.get("VLLM_OVERLAY_CACHE")
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(xdg) / "vllm-overlay"
