"""Which fix a pull request proposes, and which of the checkout's commits are its.

A checkout can carry several fixes' patches at once (on 0.33.0 the series
applies one fix's regression test and another fix with its test), but upstream
takes one fix per pull request. Each commit after the series base is matched
to its series patch by its content (:mod:`.contents`: its patch-id, else
its files and the patch's invariant; never its subject), and the patch to
its fix by its ``Invariant:`` trailer (:meth:`Series.fix_of
<vllm_patchkit.git.series.Series.fix_of>`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from vllm_overlay.fixes import FIXES
from vllm_overlay.fixes.base import Fix
from vllm_patchkit.git.series import Series
from vllm_patchkit.pull_request.contents import Carrier
from vllm_patchkit.pull_request.signoff import SeriesCommit


class ScopeError(Exception):
    """The commits do not name one fix (refused: exit 2)."""


@dataclass
class Scope:
    fix: Fix | None
    """None: no commit is a series patch, so all of them are proposed."""
    commits: list[SeriesCommit]
    series: Series
    """The series narrowed to the fix's patches (its tests, its files)."""
    left_out: list[SeriesCommit] = field(default_factory=list)
    """Commits after the base that belong to another fix or to none."""


def fix_names() -> str:
    return ", ".join(f"{fix.name} ({fix.pr})" for fix in FIXES)


def choose_fix(
    commits: list[SeriesCommit],
    series: Series,
    wanted: str | None,
    carriers: Mapping[str, Carrier],
) -> Scope:
    """The commits of fix ``wanted``, or of the only fix the commits carry
    (``carriers``: each commit's patch, by commit id, from
    :func:`~vllm_patchkit.pull_request.contents.patch_carriers`)."""
    found = (carriers.get(commit.sha) for commit in commits)
    names = [carrier.patch if carrier else None for carrier in found]
    owners = [series.fix_of(name) if name else None for name in names]
    carried = list(dict.fromkeys(fix for fix in owners if fix is not None))
    if wanted is not None:
        fix = next((f for f in FIXES if f.name == wanted), None)
        if fix is None:
            raise ScopeError(f"--fix {wanted!r} names no fix; the fixes: {fix_names()}")
        if fix not in carried:
            raise ScopeError(
                f"no commit after the series base carries a patch of {fix.name} "
                f"({', '.join(p.name for p in series.of_fix(fix))}); "
                "the commits carry: "
                + (_listing(carried, owners, names) or "no series patch")
            )
    elif not carried:
        return Scope(None, commits, series)
    elif len(carried) > 1:
        raise ScopeError(
            "the commits after the series base carry patches of "
            f"{len(carried)} fixes: {_listing(carried, owners, names)}; upstream "
            "takes one fix per pull request: pass --fix NAME"
        )
    else:
        fix = carried[0]
    mine = [c for c, owner in zip(commits, owners, strict=True) if owner is fix]
    others = [c for c, owner in zip(commits, owners, strict=True) if owner is not fix]
    return Scope(fix, mine, series.narrowed_to(fix), others)


def _listing(
    carried: list[Fix], owners: list[Fix | None], names: list[str | None]
) -> str:
    """``name (pr: 0004, 0005)`` per fix: the patches its commits are."""
    parts = []
    for fix in carried:
        mine = [n[:4] for n, o in zip(names, owners, strict=True) if o is fix and n]
        parts.append(f"{fix.name} ({fix.pr}: {', '.join(mine)})")
    return ", ".join(parts)
