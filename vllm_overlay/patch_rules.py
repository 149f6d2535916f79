"""How a fix's patches read on a vLLM source tree: the series' code rules.

Each patch of the series names, in its ``Invariant:`` trailer, one
:class:`PatchRule` of its fix; the toolkit derives from them both whether
the series carries the patch for a tree (its carry rule) and whether a tree
it was applied to looks as it must (its invariant). A fix lists its rules in
a module of its folder (``RULES``, named by :attr:`Fix.rules
<vllm_overlay.fixes.base.Fix.rules>`), imported only by the toolkit: the
plugin never reads vLLM's tests. The words are the shapes of
:class:`vllm_overlay.code.Shape`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from vllm_overlay.code import Code, Shape, declared_reads, reads

Records = list[dict[str, object]]
Cache = Callable[
    [str, bytes, tuple[Path, ...], Mapping[str, type], Callable[[bytes], Records]],
    Records,
]
"""Keeps a reading of a large file by its content: ``(kind, data, reader
files, record shape, read) -> read(data)``, or what that gave before (the
toolkit's :func:`vllm_patchkit.git.code_readings.read_cached`)."""


@dataclass(frozen=True)
class PatchRule:
    """One patch's reading of a tree, by its ``Invariant:`` name."""

    invariant: str
    """The name its patch's ``Invariant:`` trailer gives."""
    carry: Callable[[Path, Cache], Code]
    """The tree as it is: BUGGY where the series carries the patch, FIXED
    where the tree has the change already, NOT_FOR or MISSING where the patch
    is not for it, UNKNOWN or UNPARSEABLE where it cannot judge."""
    holds: Callable[[Path, Cache], Code]
    """The tree once the patch is in: FIXED when its invariant holds (large
    files read through the cache, as :attr:`carry` reads them)."""


def fix_patch(
    invariant: str,
    read: Callable[[Path, Cache], Code],
    applied: Callable[[Path, Cache], Code] | None = None,
) -> PatchRule:
    """The patch that fixes the code: carried where ``read`` finds the bug,
    in place where it finds the fix (``applied``: a stricter reading of the
    patched tree, when the fix's shape alone does not prove the patch)."""
    return PatchRule(invariant, read, applied or read)


def test_patch(
    invariant: str,
    guarded: Callable[[Path, Cache], Code],
    present: Callable[[Path, Cache], Code],
) -> PatchRule:
    """The patch that adds the fix's regression test: carried wherever the
    code it guards is there, buggy or fixed (``guarded``: the fix patch's
    reading); in place once ``present`` finds the test (FIXED)."""

    def carry(tree: Path, cache: Cache) -> Code:
        code = guarded(tree, cache)
        if code.shape not in (Shape.BUGGY, Shape.FIXED):
            return code
        return Code(Shape.BUGGY, code.file, code.line, f"the test guards {code.detail}")

    files = declared_reads(guarded)  # the test's carry reads what guarded reads
    if files is not None:
        carry = reads(*files)(carry)
    return PatchRule(invariant, carry, present)
