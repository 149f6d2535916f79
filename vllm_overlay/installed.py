"""The vLLM this interpreter would import: its version, its module files.

Found without importing vLLM's modules (metadata and import specs only),
so deciding a fix costs vLLM's start-up nothing.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def vllm_version() -> str:
    """The running vLLM's version; metadata lookup only when not imported."""
    loaded = sys.modules.get("vllm")
    if loaded is not None and isinstance(getattr(loaded, "__version__", None), str):
        return loaded.__version__
    import importlib.metadata  # here: costs the toolkit's doctor a third

    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def source_file(module: str) -> Path | None:
    """The installed ``.py`` file of ``module``, located without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)
