"""The vLLM this interpreter would import: its version, its module files.

Found without importing vLLM's modules (metadata and import specs only),
so deciding a fix costs vLLM's start-up nothing.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

NOT_INSTALLED = "not installed"
""":func:`vllm_version` when this environment has no vLLM."""


def vllm_version() -> str:
    """The running vLLM's version; metadata lookup only when not imported."""
    loaded = sys.modules.get("vllm")
    if loaded is not None and isinstance(getattr(loaded, "__version__", None), str):
        return loaded.__version__
    import importlib.metadata  # here: costs the toolkit's doctor a third

    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return NOT_INSTALLED


def source_file(module: str) -> Path | None:
    """The installed ``.py`` file of ``module``, located without importing it.

    Only the top-level package is looked up: finding ``a.b.c`` by its spec
    would import ``a.b`` (and vLLM's ``model_executor.layers.attention``
    package imports Triton's compiler). The rest is the package's layout on
    disk.
    """
    top, _, rest = module.partition(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if not rest:
        origin = spec.origin or ""
        return Path(origin) if origin.endswith(".py") else None
    for location in spec.submodule_search_locations or ():
        found = Path(location, *rest.split(".")).with_suffix(".py")
        if found.is_file():
            return found
    return None
