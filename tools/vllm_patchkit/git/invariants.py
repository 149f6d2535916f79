"""Invariants: what a vLLM source tree must look like once a patch is in.

A textual patch can apply with fuzz and land in the wrong place, or apply
cleanly to code that already has the fix. An invariant reads the code
itself (its AST; nothing is imported) and answers one question per patch,
so the same check verifies an application, detects that upstream carries
the fix, and tells whether a tree is affected.

Each is a fix's word, not this module's: a patch's ``Invariant:`` trailer
names one :class:`~vllm_overlay.patch_rules.PatchRule` of the fix it belongs
to (listed in the fix's folder, :attr:`Fix.rules
<vllm_overlay.fixes.base.Fix.rules>`), and the invariant holds when that
rule reads the patched tree as FIXED. The carry rules
(:mod:`vllm_patchkit.git.carry`) read the same rules.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from vllm_overlay.code import Shape, declared_reads
from vllm_overlay.fixes import FIXES
from vllm_overlay.fixes.base import Fix
from vllm_overlay.patch_rules import PatchRule
from vllm_patchkit.git.code_readings import read_cached, read_tree_cached


@dataclass(frozen=True)
class InvariantResult:
    name: str
    holds: bool
    detail: str
    file: Path
    line: int | None


@functools.cache
def _rules() -> Mapping[str, tuple[PatchRule, Fix]]:
    """Every fix's patch rules with their fix, by ``Invariant:`` name (one
    name, one rule)."""
    found: dict[str, tuple[PatchRule, Fix]] = {}
    for fix in FIXES:
        if not fix.rules:
            continue
        for rule in importlib.import_module(fix.rules).RULES:
            if rule.invariant in found:
                raise ValueError(f"two patch rules are named {rule.invariant!r}")
            found[rule.invariant] = (rule, fix)
    return found


def fix_of_invariant(name: str | None) -> Fix | None:
    """The fix whose rule ``Invariant: name`` is (None: no fix's): a patch
    belongs to the fix its trailer names, so no fix lists its patches."""
    owner = _rules().get(name) if name else None
    return owner[1] if owner else None


class _Invariants(Mapping[str, PatchRule]):
    """The invariant names the fixes give, read when first asked (importing
    this module imports no fix's rules)."""

    def __getitem__(self, name: str) -> PatchRule:
        return _rules()[name][0]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(_rules())

    def __len__(self) -> int:
        return len(_rules())


INVARIANTS: Mapping[str, PatchRule] = _Invariants()
"""Every invariant a patch may name, with the rule that checks it."""


def check_invariant(name: str, tree: Path) -> InvariantResult:
    try:
        rule = INVARIANTS[name]
    except KeyError:
        known = ", ".join(sorted(INVARIANTS))
        raise KeyError(f"unknown invariant {name!r} (known: {known})") from None
    code = read_tree_cached(
        f"holds:{name}",
        tree,
        lambda: rule.holds(tree, read_cached),
        declared_reads(rule.holds),
    )
    fixed = code.shape is Shape.FIXED
    return InvariantResult(name, fixed, code.detail, code.file, code.line)
