"""The series on real vLLM release trees, built from the released sources."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.checkout_state import checkout_state, snapshot
from tests.toolkit.cli_helpers import as_user
from tests.toolkit.series_expectations import applied_statuses, carried
from vllm_overlay.code import Shape
from vllm_overlay.fixes.rocm_capture_host_offsets.code import inspect_capture_tree
from vllm_patchkit.git.apply import Status, apply_series
from vllm_patchkit.git.series import Series
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.trees.releases import release_tree, sdist_path

pytestmark = pytest.mark.release_trees

A, U, N = "applied", "upstreamed", "not-carried"
SINK_CARRIED = {"0.12.0": False, "0.20.0": True, "0.25.0": True, "0.28.0": True}
"""0004 (the static-sink fix) by hand: carried from 0.14.0 on. Every
patch's state follows its trailers (series_expectations)."""


@pytest.mark.parametrize("version", sorted(SINK_CARRIED))
def test_series_applies_with_git_am_3(
    release_clone: Callable[[str], Path], series: Series, version: str
) -> None:
    tree = release_clone(version)
    git = Git(tree)
    before = git.head()
    assert inspect_capture_tree(tree).shape is Shape.BUGGY
    expected = applied_statuses(version, series)

    result = apply_series(tree, series)

    assert result.status is Status.APPLIED, result.message
    assert [p.status for p in result.patches] == expected
    assert (result.patches[3].status == A) is SINK_CARRIED[version]
    applied = [p for p, s in zip(series.patches, expected, strict=True) if s == A]
    assert git.out("rev-list", "--count", f"{before}..HEAD") == str(len(applied))
    assert git.out("log", "-1", "--format=%s") == applied[-1].subject
    assert "Signed-off-by:" in git.out("log", "-1", "--format=%B")
    assert inspect_capture_tree(tree).shape is Shape.FIXED
    assert git.is_clean()
    skipped = [p for p, s in zip(series.patches, expected, strict=True) if s == N]
    for patch in skipped:
        assert patch.name in result.message
        report = next(r for r in result.patches if r.name == patch.name)
        assert f"vLLM {version} (Affects: {patch.affects})" in report.detail

    again = apply_series(tree, series)
    assert again.status is Status.ALREADY_APPLIED
    assert [p.status for p in again.patches] == expected
    assert git.head() == result.head_after


def test_0_29_applies_only_what_upstream_lacks(
    release_clone: Callable[[str], Path], series: Series
) -> None:
    """Upstream carries the ROCm fixes (0001, 0003), not their test (0002)
    nor the static-sink fix and its test (0004, 0005)."""
    tree = release_clone("0.29.0")
    git = Git(tree)
    before = git.head()

    result = apply_series(tree, series)

    assert result.status is Status.APPLIED, result.message
    assert [p.status for p in result.patches] == applied_statuses("0.29.0", series)
    assert [p.status for p in result.patches[:3]] == [U, A, U]
    subjects = git.out("log", "--reverse", "--format=%s", f"{before}..HEAD")
    assert subjects.splitlines() == [p.subject for p in carried("0.29.0", series)]


def test_0_11_0_is_not_affected_and_the_series_carries_nothing(
    release_clone: Callable[[str], Path], series: Series
) -> None:
    """0.11.0 never zeroed the offsets and has no static-sink builder: no
    patch is carried, nothing changes."""
    tree = release_clone("0.11.0")
    git = Git(tree)
    assert inspect_capture_tree(tree).shape is Shape.NOT_FOR
    before = checkout_state(git.root)

    result = apply_series(tree, series)

    assert result.status is Status.NOT_CARRIED, result.message
    assert [p.status for p in result.patches] == [N] * len(series.patches)
    assert "vLLM 0.11.0 (Affects: 0.11.1..0.28.0)" in result.patches[0].detail
    assert checkout_state(git.root) == before
    assert git.commit_of("refs/vllm-patchkit/base") is None


@pytest.mark.slow
def test_release_tree_commit_is_reproducible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fixed commit metadata: a second cache builds the same commit id."""
    first = Git(release_tree("0.12.0")).out("rev-parse", "v0.12.0^{commit}")
    other_cache = tmp_path / "cache"
    (other_cache / "sdists").mkdir(parents=True)
    (other_cache / "sdists" / "vllm-0.12.0.tar.gz").symlink_to(sdist_path("0.12.0"))
    monkeypatch.setenv("VLLM_OVERLAY_CACHE", str(other_cache))
    rebuilt = release_tree("0.12.0")
    assert rebuilt.is_relative_to(other_cache)
    assert Git(rebuilt).out("rev-parse", "v0.12.0^{commit}") == first


def test_dirty_tree_is_refused_and_untouched(
    release_clone: Callable[[str], Path], series: Series
) -> None:
    tree = release_clone("0.28.0")
    git = Git(tree)
    target = tree / "vllm/v1/attention/backends/rocm_attn.py"
    target.write_text(target.read_text() + "# my local change\n")
    (tree / "notes.txt").write_text("untracked work\n")
    before = checkout_state(git.root)

    result = apply_series(tree, series)

    assert result.status is Status.REFUSED
    assert "dirty" in result.message and "rocm_attn.py" in result.message
    assert checkout_state(git.root) == before
    assert target.read_text().endswith("# my local change\n")


def test_conflict_rolls_back_everything(
    release_clone: Callable[[str], Path], series: Series
) -> None:
    """Upstream rewrote the zeroing lines another way: conflict, nothing lost."""
    tree = release_clone("0.28.0")
    git = as_user(tree)
    target = tree / "vllm/v1/attention/backends/rocm_attn.py"
    text = target.read_text()
    rewritten = text.replace(
        "        common_attn_metadata.query_start_loc.zero_()\n"
        "        common_attn_metadata.query_start_loc_cpu.zero_()\n",
        "        for offsets in (common_attn_metadata.query_start_loc,\n"
        "                        common_attn_metadata.query_start_loc_cpu):\n"
        "            offsets.zero_()\n",
    )
    assert rewritten != text
    target.write_text(rewritten)
    git.run("commit", "-q", "-am", "upstream: zero offsets in a loop")
    before = snapshot(git.root)

    result = apply_series(tree, series)

    assert result.status is Status.CONFLICT
    assert result.patches[0].status == "conflict"
    assert series.patches[0].name in result.message
    assert snapshot(git.root) == before
    assert not (git.git_dir() / "rebase-apply").exists()


def test_misplaced_application_is_caught_by_the_invariant(
    release_clone: Callable[[str], Path], series: Series
) -> None:
    """The hunk applies (with an offset) but the host is still zeroed elsewhere."""
    tree = release_clone("0.28.0")
    git = as_user(tree)
    target = tree / "vllm/v1/attention/backends/rocm_attn.py"
    anchor = "        attn_metadata = self.build(0, common_attn_metadata)\n"
    text = target.read_text()
    target.write_text(
        text.replace(
            anchor,
            anchor + "        common_attn_metadata.query_start_loc_cpu.zero_()\n",
            1,
        )
    )
    git.run("commit", "-q", "-am", "local: zero the host offsets early")
    before = snapshot(git.root)

    result = apply_series(tree, series)

    assert result.status is Status.CONFLICT
    assert "invariant" in result.message
    assert snapshot(git.root) == before


@pytest.mark.parametrize("kind", ["not-git", "not-vllm"])
def test_wrong_directories_are_refused(
    tmp_path: Path, series: Series, kind: str
) -> None:
    (tmp_path / "file.txt").write_text("x\n")
    if kind == "not-vllm":
        Git(tmp_path).run("init", "-q")
    result = apply_series(tmp_path, series)
    assert result.status is Status.REFUSED
    assert (
        "not a git checkout" if kind == "not-git" else "not of vLLM"
    ) in result.message
    assert (tmp_path / "file.txt").read_text() == "x\n"
