"""A scratch fourth fix (tests/overlay/test_fourth_fix.py): one folder, one file.

``vllm.plugins.endpoint_plugins.interface`` (new in vLLM 0.26.0) lacks
``SCRATCH_FIXED`` (the "bug") up to 0.28.0; the patch adds it, the overlay
sets it when the module loads. From 0.29.0 the module defines
``attach_endpoint_plugins``, which the scratch takes for upstream's fix. So
its reading agrees with its ``Affects:`` range on every release (missing
before 0.26.0, buggy to 0.28.0, fixed from 0.29.0), as a real fix's must.
"""

from __future__ import annotations

import ast
import functools
import types
from pathlib import Path

from vllm_overlay.code import Code, Shape, parse_source, top_level_bindings
from vllm_overlay.fixes.base import Fix
from vllm_overlay.patch_rules import Cache, PatchRule, fix_patch
from vllm_overlay.record import PatchTarget
from vllm_overlay.state import InstallState, action_for

INTERFACE = Path("vllm/plugins/endpoint_plugins/interface.py")
UPSTREAM = "attach_endpoint_plugins"
"""Defined from vLLM 0.29.0: the scratch's "upstream fix"."""
MARK = "SCRATCH_FIXED"

RECORD = PatchTarget(
    name="scratch-fourth-fix",
    module="vllm.plugins.endpoint_plugins.interface",
    qualname=MARK,
    source_file=str(INTERFACE),
    why="a scratch fix: the module lacks SCRATCH_FIXED",
    how="sets SCRATCH_FIXED when the module loads",
    related=("vllm-overlay patch 0099: scratch",),
    affected="0.26.0..0.28.0",
    inert_from="0.29.0",
    removal="with the test",
)


def read(file: Path) -> Code:
    """BUGGY without the mark, FIXED with it or upstream's, MISSING without the file."""
    if not file.is_file():
        return Code(Shape.MISSING, file, None, f"no {INTERFACE}")
    return _read_source(file.read_bytes(), file)


@functools.lru_cache(maxsize=8)
def _read_source(source: bytes, file: Path) -> Code:
    """One reading per file content (``check`` asks for it more than once)."""
    module = parse_source(source, file)
    if not isinstance(module, ast.Module):
        return module
    bound = top_level_bindings(module, MARK)
    if bound:
        return Code(Shape.FIXED, file, bound[0].lineno, f"{MARK} is set")
    upstream = top_level_bindings(module, UPSTREAM)
    if upstream:
        why = f"{UPSTREAM} is defined (upstream's, from 0.29.0)"
        return Code(Shape.FIXED, file, upstream[0].lineno, why)
    return Code(Shape.BUGGY, file, None, f"{INTERFACE} lacks {MARK}")


def decide(file: Path, version: str) -> InstallState:
    code = read(file)
    return FIX.state(action_for(code.shape), version, code.detail, code)


def install(module: types.ModuleType, state: InstallState) -> None:
    setattr(module, MARK, True)
    state.applied_to_class = True


def is_installed_on(module: types.ModuleType) -> bool:
    return getattr(module, MARK, False) is True


def tree_reading(tree: Path, cache: Cache) -> Code:
    return read(tree / INTERFACE)


RULES: tuple[PatchRule, ...] = (fix_patch("scratch-fourth-fix-marks", tree_reading),)

FIX = Fix(
    order=40,
    record=RECORD,
    pr="Scratch",
    install=__name__,
    decide=decide,
    read_tree=lambda root: read(root / INTERFACE),
    what=" (scratch)",
    rules=__name__,
)
