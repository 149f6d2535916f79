"""A patch's ``Affects:`` range follows the code of the newest release.

A range is the maintainers' word on the releases that need a patch; it is
written when a release is the newest, and later releases come. When the
series is rebased onto a new release, each patch's fix is read on that
release's upstream code (its carry rule, :func:`vllm_patchkit.git.carry.read_code`,
and its invariant) and the range is brought up to date, by
:func:`judge_ranges` alone (rebase reports it, refresh writes it into the
patch files, the nightly job reads it from refresh's ``--json`` output):

* still buggy on a release past a closed range: the range opens
  (``0.14.0..``), since no release fixes the bug yet;
* fixed by upstream on a release the range reaches: the range closes at
  the release before and ``Applied-Upstream: <release>`` is added;
* anything else (in range, not for this code, unreadable, already
  recorded, a regression past ``Applied-Upstream:``) leaves it as it is.

Ranges are recorded only on the newest release the repository's tags know,
with a version the tree vouches for: an older tree says nothing about later
releases. A patch is never dropped from the series for what one tree
shows: it leaves only when its whole range is upstream
(:func:`needed_elsewhere`), which only a maintainer's edit of its trailers
can make true.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vllm_overlay.code import Shape
from vllm_overlay.releases import Release, ReleaseRange
from vllm_patchkit.git.carry import TreeVersion, read_code
from vllm_patchkit.git.invariants import check_invariant
from vllm_patchkit.git.series import Patch, SeriesError
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.trees.versions import parse_tag


@dataclass(frozen=True)
class RangeJudgement:
    """One patch's range on one release: as it was, and as the code says."""

    name: str
    shape: str
    """What the patch's code rule found upstream (a :class:`Shape`; ``none``:
    the patch has no code rule)."""
    affects: str | None
    """Its ``Affects:`` as it was (None: no trailer)."""
    new_affects: str | None
    """Its ``Affects:`` as the code says (the same when unchanged)."""
    applied_upstream: str | None
    """The release to record as ``Applied-Upstream:`` (None: unchanged)."""
    why: str
    changed: bool


@dataclass
class Ranges:
    """Every patch's :class:`RangeJudgement` on one release."""

    release: str | None
    """The release judged on; None when the tree gave none to judge on."""
    skipped: str = ""
    """Why nothing was judged (empty when the patches were)."""
    patches: list[RangeJudgement] = field(default_factory=list)

    @property
    def changes(self) -> list[RangeJudgement]:
        return [j for j in self.patches if j.changed]

    def of(self, name: str) -> RangeJudgement | None:
        return next((j for j in self.patches if j.name == name), None)


def known_releases(git: Git) -> list[Release]:
    """The releases the repository's tags ``vX.Y.Z`` name, oldest first."""
    listing = git.out("tag", "--list", "v[0-9]*")
    found = {parse_tag(tag) for tag in listing.split()}
    return sorted(release for release in found if release is not None)


def judge_ranges(
    patches: Sequence[Patch], upstream: Path, version: TreeVersion, git: Git
) -> Ranges:
    """Each patch's range on the release of ``version``, read on ``upstream``
    (that release's code without the series); nothing when the release is
    unknown, not vouched for, or older than one ``git``'s tags name."""
    release = version.release
    if release is None or not version.trusted:
        why = version.why or f"version {version.version} names no release"
        return Ranges(None, f"ranges are recorded on a release: {why}")
    known = known_releases(git)
    newer = [r for r in known if r > release]
    if newer:
        return Ranges(
            str(release),
            f"vLLM {release} is not the newest release the tags "
            f"name (v{newer[-1]}): ranges are recorded on the newest",
        )
    before = max((r for r in known if r < release), default=None)
    return Ranges(
        str(release),
        patches=[judge_range(p, upstream, release, before) for p in patches],
    )


def judge_range(
    patch: Patch, upstream: Path, release: Release, before: Release | None
) -> RangeJudgement:
    """``patch``'s range as ``upstream``'s code (release ``release``; the
    newest release below it ``before``, if known) says it must be."""
    span = patch.affects
    affects = None if span is None else str(span)
    code = read_code(patch, upstream)
    shape = "none" if code is None else code.shape.value

    def same(why: str) -> RangeJudgement:
        return RangeJudgement(patch.name, shape, affects, affects, None, why, False)

    def new(
        last: Release | None, upstream_from: Release | None, why: str
    ) -> RangeJudgement:
        assert span is not None
        text = str(ReleaseRange(span.first, last))
        since = None if upstream_from is None else str(upstream_from)
        return RangeJudgement(patch.name, shape, affects, text, since, why, True)

    on = f"vLLM {release}"
    if code is None or patch.invariant is None:
        return same("no code rule (Invariant:): the range is the maintainers' word")
    if span is None:
        return same("no Affects: range: carried for every release")
    since = patch.applied_upstream
    has_it = check_invariant(patch.invariant, upstream).holds
    fixed = code.shape is Shape.FIXED or has_it
    if fixed:
        if since is not None and since <= release:
            return same(f"upstream since {since}, as recorded")
        if since is not None:
            return same(
                f"{on} has the change, before its Applied-Upstream: "
                f"{since}: the maintainers decide"
            )
        if release <= span.first:
            return same(f"{on} has the change, but the range starts there")
        if span.last is not None and span.last < release:
            return new(span.last, release, f"{on} has the change upstream")
        if before is None or before < span.first:
            return same(f"{on} has the change, but no release before it is known")
        return new(before, release, f"{on} has the change upstream")
    if code.shape is not Shape.BUGGY:
        return same(f"its code on {on} is {code.shape}: {code.detail}")
    if release < span.first:
        return same(f"buggy on {on}, before the range starts")
    if release in span:
        return same(f"still buggy on {on}, inside the range")
    if since is not None:
        return same(
            f"buggy on {on} although upstream took it in {since}: a "
            "regression? the maintainers decide"
        )
    return new(None, None, f"still buggy on {on}: no release fixes it yet")


def needed_elsewhere(patch: Patch) -> str | None:
    """Why the series keeps ``patch`` although a tree has no commit of it
    (upstream has it there, or the series does not carry it there); None
    when its whole range is upstream: every release in its ``Affects:`` is
    at or after its ``Applied-Upstream:``."""
    span, since = patch.affects, patch.applied_upstream
    if span is None:
        return "carried for every release (no Affects: range)"
    if since is None:
        return f"Affects: {span}, and no Applied-Upstream: release"
    if span.first >= since:
        return None
    return f"releases from {span.first} before {since} need it (Affects: {span})"


_AFFECTS = re.compile(r"^Affects: .*$", re.IGNORECASE | re.MULTILINE)


def with_range(text: str, judgement: RangeJudgement) -> str:
    """A patch file's ``text`` with ``judgement``'s trailers written into it,
    every other byte as it was: the ``Affects:`` line replaced, an
    ``Applied-Upstream:`` line put right before it. SeriesError when the
    message's trailers are not where :mod:`vllm_patchkit.git.series` reads
    them (nothing is guessed)."""
    if not judgement.changed:
        return text
    message, dashes, diff = text.partition("\n---\n")
    paragraphs = message.rsplit("\n\n", 1)
    if not dashes or len(paragraphs) != 2:
        raise SeriesError(f"{judgement.name}: no trailers before the diff")
    head, trailers = paragraphs
    lines = _AFFECTS.findall(trailers)
    if lines != [f"Affects: {judgement.affects}"]:
        raise SeriesError(
            f"{judgement.name}: its trailers hold {lines or 'no Affects: line'}, "
            f"not 'Affects: {judgement.affects}'"
        )
    new = f"Affects: {judgement.new_affects}"
    if judgement.applied_upstream is not None:
        new = f"Applied-Upstream: {judgement.applied_upstream}\n{new}"
    trailers = _AFFECTS.sub(lambda _: new, trailers, count=1)
    return f"{head}\n\n{trailers}{dashes}{diff}"
