"""Share the patched tree and the scenario runs across xdist workers."""

from __future__ import annotations

from tests.vllm.shared_fixtures import patched_installed_tree, scenario_reports

__all__ = ["patched_installed_tree", "scenario_reports"]
