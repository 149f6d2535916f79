"""``vllm-patchkit apply`` and ``check`` on real release trees, through the CLI."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import patchkit, patchkit_json, snapshot
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.invariants import Shape, inspect_capture_tree
from vllm_patchkit.paths import PATCHES_DIR

pytestmark = pytest.mark.release_trees

PATCH = "0001-Bugfix-ROCm-Preserve-CPU-query-offsets-during-CUDA-g.patch"
TEST_PATCH = "0002-Bugfix-ROCm-Test-that-CUDA-graph-capture-keeps-the-C.patch"


@pytest.mark.parametrize("version", ["0.12.0", "0.20.0", "0.25.0", "0.28.0"])
def test_apply_on_affected_releases(
    release_clone: Callable[[str], Path], version: str
) -> None:
    tree = release_clone(version)
    code, checked = patchkit_json("check", str(tree))
    assert code == 0
    assert [p["status"] for p in checked["patches"]] == ["applies"] * 2

    code, result = patchkit_json("apply", str(tree))

    assert code == 0, result
    assert result["status"] == "applied"
    assert [p["status"] for p in result["patches"]] == ["applied"] * 2
    assert inspect_capture_tree(tree).shape is Shape.FIXED
    git = Git(tree)
    assert git.out("log", "-1", "--format=%s").startswith("[Bugfix][ROCm] ")
    assert git.out("rev-parse", "refs/vllm-patchkit/base") == result["head_before"]

    before = snapshot(tree)
    code, again = patchkit_json("apply", str(tree))
    assert (code, again["status"]) == (0, "already-applied")
    assert snapshot(tree) == before
    code, checked = patchkit_json("check", str(tree))
    assert [p["status"] for p in checked["patches"]] == ["applied"] * 2


@pytest.mark.parametrize("version", ["0.29.0", "0.32.0"])
def test_fixed_releases_get_only_the_regression_test(
    release_clone: Callable[[str], Path], version: str
) -> None:
    """Upstream carries the fix (0001) but not its test (0002)."""
    tree = release_clone(version)
    git = Git(tree)
    before = git.head()

    code, result = patchkit_json("apply", str(tree))

    assert code == 0, result
    statuses = {p["name"]: p["status"] for p in result["patches"]}
    assert statuses == {PATCH: "upstreamed", TEST_PATCH: "applied"}
    assert PATCH in result["message"]
    assert git.out("rev-list", "--count", f"{before}..HEAD") == "1"
    assert git.out("diff", "--name-only", before, "HEAD").split() == [
        "tests/v1/attention/test_rocm_attn_cudagraph_capture.py"
    ]
    after = snapshot(tree)
    code, again = patchkit_json("apply", str(tree))
    assert (code, again["status"]) == (0, "already-applied")
    assert snapshot(tree) == after
    code, checked = patchkit_json("check", str(tree))
    assert [p["status"] for p in checked["patches"]] == ["upstreamed", "applied"]


def test_a_fully_upstreamed_series_changes_nothing(
    release_clone: Callable[[str], Path], tmp_path: Path
) -> None:
    """Exit 5 when upstream carries every patch, here the fix alone."""
    patches = tmp_path / "patches"
    patches.mkdir()
    shutil.copy(PATCHES_DIR / PATCH, patches)
    (patches / "series").write_text(PATCH + "\n")
    tree = release_clone("0.29.0")
    before = snapshot(tree)

    code, result = patchkit_json("--patches", str(patches), "apply", str(tree))

    assert (code, result["status"]) == (5, "upstreamed")
    assert snapshot(tree) == before


def test_check_reports_conflict_without_touching_anything(
    release_clone: Callable[[str], Path],
) -> None:
    tree = release_clone("0.28.0")
    git = Git(tree)
    target = tree / "vllm/v1/attention/backends/rocm_attn.py"
    text = target.read_text()
    target.write_text(
        text.replace(
            "        common_attn_metadata.query_start_loc_cpu.zero_()\n",
            "        common_attn_metadata.query_start_loc_cpu.fill_(0)  # host too\n",
        )
    )
    git.run("-c", "user.name=u", "-c", "user.email=u@x.invalid", "commit", "-qam", "x")
    before = snapshot(tree)

    code, checked = patchkit_json("check", str(tree))

    assert code == 1
    assert checked["patches"][0]["status"] == "conflict"
    assert snapshot(tree) == before


def test_text_output_and_help() -> None:
    for command in ("apply", "check", "rebase", "refresh", "upstream", "demo"):
        proc = patchkit(command, "--help")
        assert proc.returncode == 0
        assert "--json" in proc.stdout
    assert "exit codes" in patchkit("apply", "--help").stdout
