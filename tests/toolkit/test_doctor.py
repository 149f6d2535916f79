"""``vllm-patchkit doctor`` verdicts on real release trees and the install."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import patchkit, patchkit_json
from tests.toolkit.series_expectations import stock_statuses
from vllm_overlay.fixes import FIXES
from vllm_patchkit.trees.installed import installed_vllm_dir
from vllm_patchkit.trees.releases import clone_release, release_tree

pytestmark = pytest.mark.release_trees


def needs(version: str) -> dict[str, bool]:
    """Per fix, whether release ``version`` needs it: its record's range."""
    return {fix.pr: fix.record.affects(version) for fix in FIXES}


@pytest.mark.parametrize(
    ("version", "shape", "first_patch"),
    [
        # The first patch (#51585's fix, 0.11.1..0.28.0, upstream in 0.29.0)
        # by hand; every patch's state follows its trailers.
        ("0.11.0", "not-for", "not-carried"),
        ("0.12.0", "buggy", "applies"),
        ("0.28.0", "buggy", "applies"),
        ("0.29.0", "buggy", "upstreamed"),
    ],
)
def test_release_tree_verdicts(version: str, shape: str, first_patch: str) -> None:
    """Every fix decides: the tree is affected, and doctor exits 1, when any
    fix its release needs is needed (0.29.0: StaticSink alone)."""
    tree = release_tree(version)
    code, report = patchkit_json("doctor", str(tree))
    needed = needs(version)
    assert report["vllm_version"] == version
    assert report["affected"] is any(needed.values())
    assert code == (1 if any(needed.values()) else 0)
    # The summary's code is the deciding fix's: the first needed, else any.
    first_needed = next((pr for pr, yes in needed.items() if yes), None)
    if first_needed is not None:
        assert report["fix"] == first_needed
    assert report["shape"] == shape
    assert [p["status"] for p in report["patches"]] == stock_statuses(version)
    assert report["patches"][0]["status"] == first_patch
    if report["fix"] == "#51585" and report["affected"]:
        assert report["line"] and "query_start_loc_cpu" in report["reason"]
    # Each fix separately, as its record's range says.
    fixes = {f["fix"]: f["affected"] for f in report["fixes"]}
    assert fixes == needed


def test_a_stock_checkout_needing_only_static_sink_is_not_protected(
    tmp_path: Path,
) -> None:
    """Stock 0.33.0 needs StaticSink, not #51585 nor #53821 (upstream
    there): doctor exits 1 and its summary speaks of every fix."""
    tree = tmp_path / "vllm"
    clone_release("0.33.0", tree, checkout=True)
    proc = patchkit("doctor", str(tree))
    needed = needs("0.33.0")
    # By hand, of the first three fixes; a fix added since, as its record says.
    assert (needed["#51585"], needed["#53821"], needed["StaticSink"]) == (
        False,
        False,
        True,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    summary = next(
        line for line in proc.stdout.splitlines() if line.startswith("affected: ")
    )
    assert summary.startswith("affected: yes (buggy) at "), summary
    # The summary's code is the first needed fix's (StaticSink, unless a fix
    # added since comes before it and 0.33.0 needs it too).
    first = next(fix for fix in FIXES if needed[fix.pr])
    assert first.record.source_file in summary, summary
    assert summary.endswith(f" ({first.pr})"), summary
    every = next(line for line in proc.stdout.splitlines() if "every fix: " in line)
    for pr, yes in needed.items():
        assert f"{pr}: {'yes' if yes else 'no'} (" in every, every
    payload = json.loads(patchkit("doctor", "--json", str(tree)).stdout)
    assert payload["affected"] is True and payload["protected"] is False
    assert {f["fix"]: f["protected"] for f in payload["fixes"]} == {
        pr: not yes for pr, yes in needed.items()
    }


def test_installed_vllm_is_affected_but_protected_by_the_overlay() -> None:
    code, report = patchkit_json("doctor")
    assert report["vllm_version"] == "0.28.0"
    assert report["affected"] is True
    assert report["installed"] is True
    assert report["target"].endswith(f"({installed_vllm_dir().parent})")
    assert report["overlay_entry_point"] and report["overlay_would_activate"]
    assert report["protected"] is True
    assert code == 0


@pytest.mark.parametrize(
    ("env", "why"),
    [
        ({"VLLM_OVERLAY_DISABLE": "rocm-capture-keeps-host-offsets"}, "VLLM_OVERLAY"),
        ({"VLLM_PLUGINS": "some-other-plugin"}, "VLLM_PLUGINS"),
    ],
)
def test_installed_vllm_with_the_overlay_turned_off_is_not_protected(
    env: dict[str, str], why: str
) -> None:
    """The toolkit's doctor reads the environment as the overlay's does: a
    fix turned off (or the plugin not loaded) protects nothing."""
    proc = patchkit("doctor", "--json", env=env)
    report = json.loads(proc.stdout)
    assert report["affected"] is True and report["overlay_entry_point"]
    assert report["overlay_would_activate"] is False
    assert report["overlay_decision"].startswith("disabled: ")
    assert why in report["overlay_decision"]
    assert report["fixes"][0]["overlay"] == "disabled"
    assert report["protected"] is False
    assert proc.returncode == 1
