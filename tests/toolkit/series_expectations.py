"""What the real series must do on a stock release tree, read from its trailers.

Tests compare the toolkit's per-patch states with these instead of a
literal list per release, so a patch added to the series moves the
expectation with it. Derived from the trailers (``Affects:``,
``Applied-Upstream:``), not from the toolkit's deciding code, so a wrong
decision still fails the tests; each test also pins one fact by hand
(tests/toolkit/test_series_expectations.py checks this module the same way).
"""

from __future__ import annotations

from collections.abc import Iterable

from vllm_overlay.fixes import FIXES
from vllm_overlay.releases import Release, parse_release
from vllm_patchkit.git.series import Patch, Series, load_series
from vllm_patchkit.judge.regression.by_fix import scenarios_of
from vllm_patchkit.judge.regression.records import DECODE_QUERY_LENS

APPLIES, APPLIED, UPSTREAMED, NOT_CARRIED = (
    "applies",
    "applied",
    "upstreamed",
    "not-carried",
)
SERIES = load_series()


def release_of(version: str | Release) -> Release:
    """``version`` as a :data:`Release`; a test naming no release is a bug."""
    if isinstance(version, str):
        parsed = parse_release(version)
        assert parsed is not None, f"{version!r} is not a release"
        return parsed
    return version


def upstream_since(patch: Patch) -> Release | None:
    """The release of the patch's ``Applied-Upstream: 0.29.0, <PR>``; None
    for a patch upstream has not taken."""
    text = patch.trailer("Applied-Upstream")
    return None if text is None else parse_release(text.split(",")[0].strip())


def stock_status(patch: Patch, version: str | Release) -> str:
    """``check``'s state of ``patch`` on the stock tree of ``version``:
    upstreamed from its Applied-Upstream release, else applies inside its
    Affects range, else not-carried."""
    release = release_of(version)
    since = upstream_since(patch)
    if since is not None and release >= since:
        return UPSTREAMED
    if patch.affects is None or release in patch.affects:
        return APPLIES
    return NOT_CARRIED


def stock_statuses(version: str | Release, series: Series = SERIES) -> list[str]:
    """Every patch's :func:`stock_status`, in series order."""
    return [stock_status(patch, version) for patch in series.patches]


def applied_statuses(version: str | Release, series: Series = SERIES) -> list[str]:
    """The states once the series is applied (by ``apply`` or a rebase onto
    ``version``): what applies is applied, the rest as on stock."""
    return [
        APPLIED if status == APPLIES else status
        for status in stock_statuses(version, series)
    ]


def carried(version: str | Release, series: Series = SERIES) -> list[Patch]:
    """The patches applying the series to the stock tree commits, in order."""
    return [p for p in series.patches if stock_status(p, version) == APPLIES]


SERIES_FIXES = {
    "rocm-capture-keeps-host-offsets": "#51585",
    "rocm-aiter-unified-capture-keeps-offsets": "#53821",
    "static-sink-keeps-shared-seq-lens": "StaticSink",
}
"""The series' three fixes by name, in the registry's order, with their PR
labels: tests pin their facts by hand; a fix added later joins them
wherever its ``order`` puts it."""
FIRST_FIXES = tuple(SERIES_FIXES.values())
"""Their PR labels: tests pin their checks' counts by hand."""


def patches_in(
    status: str, version: str | Release, series: Series = SERIES
) -> list[str]:
    """The names of the patches whose :func:`stock_status` on ``version`` is
    ``status``, in series order."""
    return [p.name for p in series.patches if stock_status(p, version) == status]


def counted_fixes(version: str | Release, series: Series = SERIES) -> list[str]:
    """The fixes (PR labels) whose checks count on a tree of ``version``:
    those whose first patch the series carries for it (its trailers)."""
    return [
        fix.pr
        for fix in FIXES
        if stock_status(series.of_fix(fix)[0], version) == APPLIES
    ]


def suite_size(prs: Iterable[str]) -> int:
    """How many checks the suite has for the fixes ``prs``: each scenario
    their ``by_fix`` modules name, at every decode query length."""
    wanted = set(prs)
    scenarios = sum(len(scenarios_of(fix.name)) for fix in FIXES if fix.pr in wanted)
    return scenarios * len(DECODE_QUERY_LENS)


def doctor_exit(version: str | Release, unreadable: Iterable[str]) -> int:
    """``doctor``'s exit on an unpatched tree of ``version`` whose fixes
    ``unreadable`` (PR labels) cannot be read: 1 when another fix is needed
    there (a needed, unprotected fix outranks what cannot be read), else 3."""
    return 1 if set(counted_fixes(version)) - set(unreadable) else 3
