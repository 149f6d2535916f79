"""The fix registry: every fix the overlay and the series carry, one module each.

Each module of this package other than :mod:`.base` exports ``FIX``, a
:class:`~vllm_overlay.fixes.base.Fix`; they are found by listing the
package, so adding a fix is one module here plus its patches. They come in
the order their ``order`` declares, a fix always after those it ``needs``.
The plugin, both doctors, the verdict's per-fix lines, the matrix's columns
and ``verify`` read them here. AST only: nothing of vLLM is imported.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

from vllm_overlay.fixes.base import Fix
from vllm_overlay.record import PatchTarget
from vllm_overlay.settings import allowed_by_vllm_plugins, disabled_names
from vllm_overlay.state import InstallState


def _discover() -> tuple[Fix, ...]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name == "base" or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        fix = getattr(module, "FIX", None)
        if not isinstance(fix, Fix):
            raise TypeError(f"{module.__name__} exports no FIX (a Fix)")
        found.append(fix)
    return _ordered(found)


def _ordered(found: list[Fix]) -> tuple[Fix, ...]:
    """By ``order``, each fix after every fix it ``needs``."""
    names = {fix.name for fix in found}
    if len(names) != len(found):
        raise ValueError("two fixes share a name")
    done: list[Fix] = []
    pending = sorted(found, key=lambda fix: (fix.order, fix.name))
    while pending:
        named = {fix.name for fix in done}
        ready = next((fix for fix in pending if set(fix.needs) <= named), None)
        if ready is None:
            missing = {n for fix in pending for n in fix.needs} - names
            raise ValueError(
                f"fixes need {sorted(missing)}, which no fix is"
                if missing
                else f"fixes need each other: {[f.name for f in pending]}"
            )
        pending.remove(ready)
        done.append(ready)
    return tuple(done)


FIXES: tuple[Fix, ...] = _discover()
"""Every fix, in the order the plugin decides and arms them."""
RECORD: tuple[PatchTarget, ...] = tuple(fix.record for fix in FIXES)
"""What the overlay patches, one target per fix."""


def by_name(name: str) -> Fix:
    return next(fix for fix in FIXES if fix.name == name)


def disable_setting() -> tuple[set[str], list[str]]:
    """The fix names ``VLLM_OVERLAY_DISABLE`` turns off, and the names in it
    that are no fix's (ignored)."""
    return disabled_names(fix.name for fix in FIXES)


def off_reason(name: str) -> str | None:
    """Why vLLM started in this environment would not run fix ``name``
    (None: it would)."""
    if not allowed_by_vllm_plugins():
        return "VLLM_PLUGINS does not name vllm_overlay"
    if name in disable_setting()[0]:
        return "VLLM_OVERLAY_DISABLE is set"
    return None


def assess_installed() -> list[InstallState]:
    """Each fix's decision for the vLLM this interpreter would import."""
    states: dict[str, InstallState] = {}
    for fix in FIXES:
        states[fix.name] = fix.assess({n: states[n] for n in fix.needs})
    return list(states.values())


def assess_tree(root: Path, version: str) -> list[InstallState]:
    """Each fix's decision for the vLLM source tree (or install) at ``root``."""
    states: dict[str, InstallState] = {}
    for fix in FIXES:
        before = {n: states[n] for n in fix.needs}
        states[fix.name] = fix.assess_tree(root, version, before)
    return list(states.values())


def on_vllm(name: str, load: bool = False) -> bool | None:
    """Whether vLLM's loaded code carries fix ``name`` now (None: the module
    is not loaded; ``load`` imports it first)."""
    fix = by_name(name)
    module = sys.modules.get(fix.module)
    if module is None and load:
        module = importlib.import_module(fix.module)
    if module is None:
        return None
    return fix.installed_on(module)
