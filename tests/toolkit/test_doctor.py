"""``vllm-patchkit doctor`` verdicts on real release trees and the install."""

from __future__ import annotations

import json

import pytest

from tests.toolkit.cli_helpers import patchkit, patchkit_json
from vllm_patchkit.trees.installed import installed_vllm_dir
from vllm_patchkit.trees.releases import release_tree

pytestmark = pytest.mark.release_trees


@pytest.mark.parametrize(
    ("version", "affected", "shape", "patch_status"),
    [
        # The fix, its regression test, #53821's backport (0.27.0..0.28.0),
        # the static-sink fix and its test (0.14.0 on, upstream in none).
        ("0.11.0", False, "no-zeroing", ["not-carried"] * 5),
        ("0.12.0", True, "buggy", ["applies", "applies"] + ["not-carried"] * 3),
        ("0.28.0", True, "buggy", ["applies"] * 5),
        (
            "0.29.0",
            False,
            "fixed",
            ["upstreamed", "applies", "upstreamed", "applies", "applies"],
        ),
    ],
)
def test_release_tree_verdicts(
    version: str, affected: bool, shape: str, patch_status: list[str]
) -> None:
    tree = release_tree(version)
    code, report = patchkit_json("doctor", str(tree))
    assert report["vllm_version"] == version
    assert report["affected"] is affected
    assert report["shape"] == shape
    assert report["file"].endswith("vllm/v1/attention/backends/rocm_attn.py")
    assert [p["status"] for p in report["patches"]] == patch_status
    assert code == (1 if affected else 0)
    if affected:
        assert report["line"] and "query_start_loc_cpu" in report["reason"]
    # Each fix separately: 0.11.0 has no AITER unified backend, 0.11.0 and
    # 0.12.0 no static-sink builder.
    fixes = {f["fix"]: (f["affected"], f["patch_state"]) for f in report["fixes"]}
    assert fixes == {
        "#51585": (affected, patch_status[0]),
        "#53821": (version in ("0.12.0", "0.28.0"), patch_status[2]),
        "StaticSink": (version in ("0.28.0", "0.29.0"), patch_status[3]),
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
