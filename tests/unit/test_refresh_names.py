"""Refresh keeps a patch's file name while its subject stays the same."""

from __future__ import annotations

from vllm_patchkit.git.refresh import rewrite_series, stable_names


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


def entries(text: str) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for raw in text.splitlines():
        name = raw.split("#", 1)[0].strip()
        out.append((raw, name or None))
    return out


SERIES = "# head\n  # indented\n\nA.patch  # first\n    # between\nB.patch\n# end\n"


def test_a_series_with_the_same_patches_is_unchanged() -> None:
    assert rewrite_series(entries(SERIES), ["A.patch", "B.patch"]) == SERIES


def test_a_dropped_patch_loses_its_line_only() -> None:
    assert rewrite_series(entries(SERIES), ["B.patch"]) == SERIES.replace(
        "A.patch  # first\n", ""
    )


def test_a_new_patch_goes_after_the_one_before_it() -> None:
    assert rewrite_series(entries(SERIES), ["A.patch", "N.patch", "B.patch"]) == (
        SERIES.replace("A.patch  # first\n", "A.patch  # first\nN.patch\n")
    )
    assert rewrite_series(entries(SERIES), ["N.patch", "A.patch", "B.patch"]) == (
        SERIES.replace("A.patch  # first\n", "N.patch\nA.patch  # first\n")
    )


def test_reordered_patches_take_their_comments_along() -> None:
    assert rewrite_series(entries(SERIES), ["B.patch", "A.patch"]) == (
        "# head\n  # indented\n\nB.patch\n    # between\nA.patch  # first\n# end\n"
    )


def test_all_patches_replaced_go_where_the_first_was() -> None:
    assert rewrite_series(entries(SERIES), ["X.patch"]) == (
        "# head\n  # indented\n\nX.patch\n    # between\n# end\n"
    )
    assert rewrite_series([], ["X.patch"]) == "X.patch\n"
