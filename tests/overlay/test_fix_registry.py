"""The fix registry: every fix is a folder of ``vllm_overlay/fixes`` plus its patches.

That a new fix needs nothing else is proven by a scratch fourth fix
(``test_fourth_fix.py``); here, that the registry and the series agree.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

from tests.toolkit.series_expectations import SERIES_FIXES
from vllm_overlay.fixes import FIXES, by_name
from vllm_patchkit.git.invariants import INVARIANTS, fix_of_invariant
from vllm_patchkit.git.series import load_series


def test_the_registry_names_each_fix_once_with_its_patches() -> None:
    """Every fix has patches in the series; each patch is one fix's (the
    one its Invariant: names a rule of), and the fix's come first in it."""
    series = load_series()
    assert len({fix.name for fix in FIXES}) == len(FIXES)
    ours = [(fix.name, fix.pr) for fix in FIXES if fix.name in SERIES_FIXES]
    assert ours == list(SERIES_FIXES.items())
    for fix in FIXES:
        mine = series.of_fix(fix)
        assert mine and all(series.fix_of(p.name) is fix for p in mine), fix.name
        assert any(f.startswith("vllm/") for f in mine[0].files), mine[0].name
        assert all(by_name(need) in FIXES[: FIXES.index(fix)] for need in fix.needs)
    assert by_name("rocm-aiter-unified-capture-keeps-offsets").needs == (
        "rocm-capture-keeps-host-offsets",
    )


def test_each_patch_names_a_rule_of_its_own_fix() -> None:
    """A patch's Invariant: is one of its fix's patch rules (the carry rule
    and the invariant derive from it), and every rule has its patch."""
    patches = load_series().patches
    for fix in FIXES:
        rules = {rule.invariant for rule in import_module(fix.rules).RULES}
        named = {p.invariant for p in patches if fix_of_invariant(p.invariant) is fix}
        assert named == rules, fix.name
    assert set(INVARIANTS) == {p.invariant for p in patches}


def test_each_fix_reaches_its_install_side_when_called() -> None:
    """``arm``, ``installed_on`` and ``also`` may wait in the fix's install
    module (``check`` never imports it): each names a function there, and a
    call goes through to it (a module vLLM never loaded carries no fix)."""
    for fix in FIXES:
        for call in (fix.arm, fix.installed_on, fix.also):
            if call is None:
                continue
            found = getattr(import_module(call.__module__), call.__name__, None)
            assert callable(found), f"{fix.name}: {call.__module__}.{call.__name__}"
        assert fix.installed_on(ModuleType("vllm_not_loaded")) is False, fix.name
