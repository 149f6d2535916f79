"""The overlay through vLLM's own plugin loader on releases of three eras.

0.12.0 (0.11.x-0.14.x: ``CommonAttentionMetadata`` in ``backends.utils``,
the kernels under ``vllm.attention.ops``), 0.20.0 (0.17.x-0.22.x) and 0.28.0
(the last affected release) each run the #51585 capture scenario twice in
fresh processes, in the tree's runtime (this venv's torch plus the release's
missing pure-Python requirements): plugins off, the bug shows; the overlay
loaded by ``load_general_plugins()``, it is gone (each fix the release needs
is judged by its own core scenarios: StaticSink too from 0.14.0). 0.29.0,
which carries both ROCm fixes, must have them untouched; StaticSink, which
it still needs, is fixed. One probe per release (two processes), shared by
the tests of the session.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from vllm_overlay.fixes.rocm_aiter_unified_builder import (
    RECORD as AITER_UNIFIED_OFFSETS,
)
from vllm_overlay.fixes.rocm_capture_host_offsets import (
    RECORD as CAPTURE_HOST_OFFSETS,
)
from vllm_patchkit.judge.overlay_probe import BUG, FIXES, INERT, PASSES, OverlayResult
from vllm_patchkit.trees.releases import release_tree

pytestmark = [pytest.mark.overlay_eras, pytest.mark.release_trees]

ERAS = ("0.12.0", "0.20.0", "0.28.0")
"""One affected release per era of vLLM's module layout."""
FIXED = "0.29.0"
SINK = "static-sink-keeps-shared-seq-lens"

_results: dict[str, OverlayResult] = {}


@pytest.fixture(scope="session")
def probed() -> Callable[[str], OverlayResult]:
    """The overlay probe of a release, run once per session."""
    from vllm_patchkit.judge.overlay_probe import probe_overlay

    def get(version: str) -> OverlayResult:
        if version not in _results:
            _results[version] = probe_overlay(release_tree(version))
        return _results[version]

    return get


@pytest.mark.parametrize("version", ERAS)
def test_overlay_fixes_an_affected_release(
    version: str, probed: Callable[[str], OverlayResult]
) -> None:
    result = probed(version)
    assert result.status == FIXES, result.why
    assert (result.without, result.with_overlay) == (BUG, PASSES)
    capture_part = result.parts["#51585"]
    assert (
        capture_part["part"] == FIXES
        and "capture_effects[q=1]" in (capture_part["why"])
    )
    assert CAPTURE_HOST_OFFSETS.name in result.installed
    capture = result.fixes[CAPTURE_HOST_OFFSETS.name]
    assert capture["status"] == "installed" and not capture["problems"]
    assert (
        "`common_attn_metadata.query_start_loc_cpu.zero_()` removed"
        in (capture["reason"])
    )
    # vLLM's loader ran the overlay, which said so when rocm_attn was imported.
    assert any(
        line.startswith("INFO: vllm-overlay: installed the #51585 capture fix")
        for line in result.log
    ), result.log
    assert not [line for line in result.log if line.startswith("WARNING")]
    assert result.runtime is not None and result.runtime["torch"]


def test_overlay_leaves_upstreams_fixes_alone_and_fixes_static_sink(
    probed: Callable[[str], OverlayResult],
) -> None:
    result = probed(FIXED)
    # The cell is StaticSink's, which the release still needs (it said
    # "inert" while the probe ran #51585's scenario only).
    assert result.status == FIXES, result.why
    assert (result.without, result.with_overlay) == (BUG, PASSES)
    assert result.installed == (SINK,)
    assert result.parts["StaticSink"]["part"] == FIXES
    for name in (CAPTURE_HOST_OFFSETS.name, AITER_UNIFIED_OFFSETS.name):
        assert result.fixes[name]["action"] == "not-needed"
    for label in ("#51585", "#53821"):
        assert result.parts[label]["part"] == INERT, result.parts[label]
        assert result.parts[label]["with"] == PASSES
    # Only StaticSink's install logs above debug.
    above = [line for line in result.log if not line.startswith("DEBUG")]
    assert all("StaticSink" in line for line in above), result.log
