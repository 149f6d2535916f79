"""A fix's releases are written once: its patch's ``Affects:`` trailer.

The overlay's records (:mod:`vllm_overlay.fixes`) cannot read the trailer
at run time: the overlay is installed alone, without ``patches/``. So each
record's ``affected``/``inert_from`` is checked here against the trailers of
the patches it names, through the toolkit's one release parser.
"""

from __future__ import annotations

import pytest

from vllm_overlay.fixes import FIXES
from vllm_overlay.fixes.base import Fix
from vllm_overlay.releases import parse_release
from vllm_patchkit.git.series import Series
from vllm_patchkit.trees.versions import parse_range, require_release

NOT_UPSTREAM = "none yet"
"""A record's ``inert_from`` while no upstream release carries the fix."""


@pytest.mark.parametrize("fix", FIXES, ids=lambda fix: fix.name)
def test_the_record_s_releases_are_its_patch_s(fix: Fix, series: Series) -> None:
    """The record ends where the fix patch's ``Affects:`` ends and covers it
    (the overlay may cover releases the series leaves out, never fewer);
    both stay open while no release fixes the bug; it is inert from the
    patch's ``Applied-Upstream:`` release."""
    fix_patch = series.of_fix(fix)[0]
    affects = fix_patch.affects
    assert affects is not None, fix_patch.name
    record = parse_range(fix.record.affected)
    assert record.last == affects.last, (fix.record.affected, str(affects))
    assert record.first <= affects.first, (fix.record.affected, str(affects))
    upstream = fix_patch.trailer("Applied-Upstream")
    assert (record.last is None) == fix.record.unfixed == (upstream is None)
    if upstream is None:
        assert fix.record.inert_from == NOT_UPSTREAM
    else:
        assert affects.last is not None
        since = require_release(upstream.split(",")[0].strip())
        assert require_release(fix.record.inert_from) == since
        assert since > affects.last


@pytest.mark.parametrize("fix", FIXES, ids=lambda fix: fix.name)
def test_a_fix_s_test_patches_start_with_its_fix(fix: Fix, series: Series) -> None:
    """A regression test patch (one that adds tests only) is carried from
    the fix's first release on (upstream keeps no such test, so its range
    stays open); any other patch of the fix (a backport for older releases,
    as 0006 is for the V1 runner) lies inside the fix's range."""
    first_patch, *rest = series.of_fix(fix)
    first = first_patch.affects
    assert first is not None
    for patch in rest:
        name = patch.name
        affects = patch.affects
        assert affects is not None and affects.first == first.first, name
        if all(file.startswith("tests/") for file in patch.files):
            assert affects.last is None, name
        else:
            assert affects.last is not None and affects.last in first, name


def test_the_records_name_releases_the_parser_reads() -> None:
    for fix in FIXES:
        assert parse_release(fix.record.inert_from) or (
            fix.record.inert_from == NOT_UPSTREAM
        )
