"""The overlay probe judges every fix of the registry, on a real release.

On vLLM 0.33.0 (the release tree the default run builds already, in its
runtime) StaticSink is the one fix the code needs: the probe loads the
overlay through vLLM's own ``load_general_plugins()``, runs each fix's core
scenarios without and with it, and the cell is ``fixes`` because of
StaticSink (its bug without, a pass with, installed on vLLM's class), with
the ROCm fixes inert (fixed upstream: passing both ways, nothing
installed). The matrix's 0.33.0 and 0.34.0 rows said "inert" while the
probe ran only #51585's scenario.
"""

from __future__ import annotations

import pytest

from vllm_overlay.fixes import FIXES as REGISTRY
from vllm_overlay.fixes import by_name
from vllm_patchkit.judge.overlay_probe import BUG, FIXES, INERT, PASSES, probe_overlay
from vllm_patchkit.trees.releases import release_tree

pytestmark = [pytest.mark.plugin_releases, pytest.mark.release_trees]

SINK = by_name("static-sink-keeps-shared-seq-lens")


def test_the_probe_says_fixes_on_a_release_that_needs_only_static_sink() -> None:
    result = probe_overlay(release_tree("0.33.0"))
    assert result.status == FIXES, result.why
    assert (result.without, result.with_overlay) == (BUG, PASSES)
    assert result.installed == (SINK.name,)
    assert list(result.parts) == [fix.pr for fix in REGISTRY]
    sink = result.parts[SINK.pr]
    assert (sink["needed"], sink["part"]) == (True, FIXES), sink
    assert (sink["without"], sink["with"], sink["installed"]) == (BUG, PASSES, True)
    assert "static_sink_twice[q=1]" in sink["why"]  # a core check that failed
    for fix in REGISTRY:
        if fix is not SINK:
            part = result.parts[fix.pr]
            assert (part["needed"], part["part"]) == (False, INERT), part
            assert (part["without"], part["with"]) == (PASSES, PASSES), part
    assert any("installed the StaticSink" in line for line in result.log), result.log
