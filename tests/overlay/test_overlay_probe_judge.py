"""The overlay probe's verdict from its two runs' reports (no vLLM needed).

The reports are shaped as the measuring process writes them; what is under
test is the rule that turns two runs into fixes / inert / fails / cannot
judge, above all that a run which did not happen is never a pass.
"""

from __future__ import annotations

from typing import Any

from vllm_patchkit.judge.overlay_probe import CANNOT_JUDGE, FAILS, FIXES, INERT, judge

CAPTURE = "rocm-capture-keeps-host-offsets"


def run(zeroed: bool, loaded: bool, status: str | None = None) -> dict[str, Any]:
    lens = [0, 0, 0, 0] if zeroed else [1, 1, 1, 1]
    report: dict[str, Any] = {
        "plugins_loaded": loaded,
        "scenario": {"bug": zeroed, "next_query_lens": lens, "device_zeroed": True},
    }
    if status is not None:
        report["fixes"] = {CAPTURE: {"action": "installed", "status": status}}
        report["hooks_left"] = []
    return report


def test_broken_without_and_fixed_with_is_fixes() -> None:
    verdict = judge(run(True, False), run(False, True, "installed"))
    assert verdict["status"] == FIXES and verdict["installed"] == (CAPTURE,)


def test_broken_with_the_overlay_too_fails() -> None:
    assert judge(run(True, False), run(True, True, "armed"))["status"] == FAILS


def test_overlay_not_loaded_cannot_judge() -> None:
    verdict = judge(run(True, False), run(False, False))
    assert verdict["status"] == CANNOT_JUDGE
    assert "did not load" in verdict["why"]


def test_a_run_that_failed_cannot_judge() -> None:
    verdict = judge({"error": "ImportError: gguf"}, run(False, True, "installed"))
    assert verdict["status"] == CANNOT_JUDGE and verdict["without"] == "not run"


def test_patching_a_fixed_release_fails() -> None:
    assert judge(run(False, False), run(False, True, "installed"))["status"] == FAILS


def test_fixed_release_left_alone_is_inert() -> None:
    with_ = run(False, True)
    with_["fixes"] = {CAPTURE: {"action": "not-needed", "status": "not-needed"}}
    with_["hooks_left"] = []
    assert judge(run(False, False), with_)["status"] == INERT
