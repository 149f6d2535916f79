"""A scratch fourth fix (tests/overlay/test_fourth_fix.py): one folder, one file.

``vllm.model_executor.layers.attention.pcp`` (vLLM 0.27.0 to 0.28.0 only)
lacks ``SCRATCH_FIXED`` (the "bug"); the patch adds it, the overlay sets it
when the module loads. Its reading agrees with its ``Affects:`` range on
every release (the file is missing before and after), as a real fix's must.
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

PCP = Path("vllm/model_executor/layers/attention/pcp.py")
MARK = "SCRATCH_FIXED"

RECORD = PatchTarget(
    name="scratch-fourth-fix",
    module="vllm.model_executor.layers.attention.pcp",
    qualname=MARK,
    source_file=str(PCP),
    why="a scratch fix: the module lacks SCRATCH_FIXED",
    how="sets SCRATCH_FIXED when the module loads",
    related=("vllm-overlay patch 0099: scratch",),
    affected="0.27.0-0.28.0",
    inert_from="none yet",
    removal="with the test",
)


def read(file: Path) -> Code:
    """BUGGY without the mark, FIXED with it, MISSING without the file."""
    if not file.is_file():
        return Code(Shape.MISSING, file, None, f"no {PCP}")
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
    return Code(Shape.BUGGY, file, None, f"{PCP} lacks {MARK}")


def decide(code: Code, version: str) -> InstallState:
    return FIX.state(action_for(code.shape), version, code.detail, code)


def assess(before: object = None) -> InstallState:
    return FIX.assess_installed(lambda file, version: decide(read(file), version))


def assess_tree(root: Path, version: str, before: object = None) -> InstallState:
    return FIX.assess_in(root, version, lambda file, v: decide(read(file), v))


def _mark(module: types.ModuleType, state: InstallState) -> None:
    setattr(module, MARK, True)
    state.applied_to_class = True


def arm(state: InstallState) -> None:
    # Imported here: ``check`` imports the record, never the install side.
    from vllm_overlay.arming import arm_on_import

    arm_on_import(state, RECORD.module, lambda module: _mark(module, state))


def is_installed_on(module: types.ModuleType) -> bool:
    return getattr(module, MARK, False) is True


def tree_reading(tree: Path, cache: Cache) -> Code:
    return read(tree / PCP)


RULES: tuple[PatchRule, ...] = (fix_patch("scratch-fourth-fix-marks", tree_reading),)

FIX = Fix(
    order=40,
    record=RECORD,
    pr="Scratch",
    patches=("0099-Scratch-mark-pcp.patch",),
    assess=assess,
    assess_tree=assess_tree,
    read_tree=lambda root: read(root / PCP),
    arm=arm,
    installed_on=is_installed_on,
    scenarios=("scratch_fourth_fix",),
    core_scenarios=("scratch_fourth_fix",),
    what=" (scratch)",
    rules=__name__,
)
