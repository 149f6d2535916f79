"""Every fix's decision at once, for reports: the installed vLLM or any tree.

The plugin decides each fix in :mod:`vllm_overlay.plugin`; reports (``python
-m vllm_overlay``, the toolkit's ``doctor`` and ``matrix``) ask here, one
:class:`~vllm_overlay.install.InstallState` per record entry, in the
record's order. AST only: nothing from the vLLM in question is imported.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from vllm_overlay import aiter_fix, fix
from vllm_overlay.aiter_install import AITER_MODULE, assess_aiter, assess_aiter_file
from vllm_overlay.aiter_shape import AITER_UNIFIED_ATTN
from vllm_overlay.capture_shape import ROCM_ATTN, CaptureCode, inspect_capture_tree
from vllm_overlay.install import (
    UPSTREAM_MODULE,
    Action,
    InstallState,
    assess,
    assess_file,
)
from vllm_overlay.record import AITER_UNIFIED_OFFSETS, CAPTURE_HOST_OFFSETS

MODULES = {
    CAPTURE_HOST_OFFSETS.name: UPSTREAM_MODULE,
    AITER_UNIFIED_OFFSETS.name: AITER_MODULE,
}
"""The vLLM module each fix patches when it is imported."""


def assess_installed() -> list[InstallState]:
    """Each fix's decision for the vLLM this interpreter would import."""
    capture = assess()
    rocm = capture.code if isinstance(capture.code, CaptureCode) else None
    return [capture, assess_aiter(rocm)]


def assess_tree(root: Path, version: str) -> list[InstallState]:
    """Each fix's decision for the vLLM source tree (or install) at ``root``."""
    rocm = inspect_capture_tree(root)
    if rocm.file.is_file():
        capture = assess_file(rocm.file, version)
    else:
        capture = InstallState(Action.ABSENT, version, f"no {ROCM_ATTN} in {root}")
    aiter_file = root / AITER_UNIFIED_ATTN
    if not aiter_file.is_file():
        aiter = InstallState(
            Action.ABSENT,
            version,
            f"no {AITER_UNIFIED_ATTN} in {root}",
            name=AITER_UNIFIED_OFFSETS.name,
        )
    else:
        aiter = assess_aiter_file(aiter_file, rocm, version)
    return [capture, aiter]


def on_vllm(name: str, load: bool = False) -> bool | None:
    """Whether vLLM's loaded code carries fix ``name`` now (None: the module
    is not loaded; ``load`` imports it first)."""
    module_name = MODULES[name]
    module = sys.modules.get(module_name)
    if module is None and load:
        module = importlib.import_module(module_name)
    if module is None:
        return None
    if name == CAPTURE_HOST_OFFSETS.name:
        return fix.is_installed_on(module)
    return aiter_fix.is_installed_on(module)
