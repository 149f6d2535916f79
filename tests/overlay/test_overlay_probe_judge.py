"""The overlay probe's verdict from its two runs' reports (no vLLM needed).

The reports are shaped as the measuring process writes them; what is under
test is the rule that turns two runs into fixes / inert / fails / cannot
judge, per fix and over every fix, above all that a run which did not
happen is never a pass.
"""

from __future__ import annotations

from typing import Any

from vllm_overlay.fixes import FIXES as REGISTRY
from vllm_overlay.fixes import by_name
from vllm_patchkit.judge.overlay_probe import CANNOT_JUDGE, FAILS, FIXES, INERT, judge

CAPTURE = "rocm-capture-keeps-host-offsets"
SINK = "static-sink-keeps-shared-seq-lens"
AFFECTED = {fix.name: fix.name == CAPTURE for fix in REGISTRY}
"""A release that needs only the capture fix (0.11.1-0.13.0)."""
FIXED_RELEASE = {fix.name: False for fix in REGISTRY}


def run(zeroed: bool, loaded: bool, status: str | None = None) -> dict[str, Any]:
    """One run's report: the capture fix's checks fail when ``zeroed``;
    ``status``: what the overlay says of the capture fix."""
    verdict = "not-fixed" if zeroed else "fixed"
    report: dict[str, Any] = {
        "plugins_loaded": loaded,
        "verdicts": {
            by_name(CAPTURE).pr: {"verdict": verdict, "why": f"capture {verdict}"}
        },
    }
    if status is not None:
        report["fixes"] = {CAPTURE: {"action": "installed", "status": status}}
        report["hooks_left"] = []
    return report


def test_broken_without_and_fixed_with_is_fixes() -> None:
    verdict = judge(run(True, False), run(False, True, "installed"), AFFECTED)
    assert verdict["status"] == FIXES and verdict["installed"] == (CAPTURE,)
    assert verdict["parts"][by_name(CAPTURE).pr]["part"] == FIXES
    assert (verdict["without"], verdict["with_overlay"]) == ("bug reproduced", "passes")


def test_broken_with_the_overlay_too_fails() -> None:
    assert (
        judge(run(True, False), run(True, True, "armed"), AFFECTED)["status"] == FAILS
    )


def test_overlay_not_loaded_cannot_judge() -> None:
    verdict = judge(run(True, False), run(False, False), AFFECTED)
    assert verdict["status"] == CANNOT_JUDGE
    assert "did not load" in verdict["why"]


def test_a_run_that_failed_cannot_judge() -> None:
    verdict = judge(
        {"error": "ImportError: gguf"}, run(False, True, "installed"), AFFECTED
    )
    assert verdict["status"] == CANNOT_JUDGE and verdict["without"] == "not run"


def test_patching_a_fixed_release_fails() -> None:
    verdict = judge(run(False, False), run(False, True, "installed"), FIXED_RELEASE)
    assert verdict["status"] == FAILS


def test_fixed_release_left_alone_is_inert() -> None:
    with_ = run(False, True)
    with_["fixes"] = {CAPTURE: {"action": "not-needed", "status": "not-needed"}}
    with_["hooks_left"] = []
    assert judge(run(False, False), with_, FIXED_RELEASE)["status"] == INERT


def test_every_fix_the_tree_needs_has_its_part() -> None:
    """Two needed fixes: one fixed is not enough; each is judged by its own
    checks, and the cell is the worst part."""
    needs = {**AFFECTED, SINK: True}
    sink = by_name(SINK).pr
    without, with_ = run(True, False), run(False, True, "installed")
    without["verdicts"][sink] = {"verdict": "not-fixed", "why": "sink added twice"}
    with_["verdicts"][sink] = {"verdict": "not-fixed", "why": "sink added twice"}
    verdict = judge(without, with_, needs)
    assert verdict["status"] == FAILS
    assert verdict["parts"][sink]["part"] == FAILS
    assert verdict["parts"][by_name(CAPTURE).pr]["part"] == FIXES
    with_["verdicts"][sink] = {"verdict": "fixed", "why": "ok"}
    with_["fixes"][SINK] = {"action": "installed", "status": "installed"}
    assert judge(without, with_, needs)["status"] == FIXES


def test_a_needed_fix_whose_checks_could_not_run_cannot_judge() -> None:
    without, with_ = run(True, False), run(False, True, "installed")
    for report in (without, with_):
        report["verdicts"] = {}  # its scenarios did not run
    assert judge(without, with_, AFFECTED)["status"] == CANNOT_JUDGE
