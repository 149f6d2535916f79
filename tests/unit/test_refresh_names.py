"""Refresh keeps a patch's file name while its subject stays the same."""

from __future__ import annotations

from vllm_patchkit.refresh import stable_names


def test_a_drop_does_not_renumber_the_rest() -> None:
    fresh = ["0001-Add-the-test.patch"]
    old = ["0001-Fix-the-bug.patch", "0002-Add-the-test.patch"]
    assert stable_names(fresh, old) == ["0002-Add-the-test.patch"]


def test_new_subjects_are_numbered_after_the_kept_ones() -> None:
    fresh = ["0001-Fix-the-bug.patch", "0002-Reworded.patch", "0003-New.patch"]
    old = ["0001-Fix-the-bug.patch", "0002-Add-the-test.patch"]
    assert stable_names(fresh, old) == [
        "0001-Fix-the-bug.patch",
        "0002-Reworded.patch",
        "0003-New.patch",
    ]


def test_first_export_uses_format_patch_names() -> None:
    fresh = ["0001-A.patch", "0002-B.patch"]
    assert stable_names(fresh, []) == fresh


def test_subjects_that_share_a_slug_get_distinct_names() -> None:
    fresh = ["0001-Long-subject-cut-at-52.patch", "0002-Long-subject-cut-at-52.patch"]
    old = ["0001-Long-subject-cut-at-52.patch"]
    assert stable_names(fresh, old) == [
        "0001-Long-subject-cut-at-52.patch",
        "0002-Long-subject-cut-at-52.patch",
    ]
