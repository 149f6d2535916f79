"""The series file and patch headers: the real series, and malformed input."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from vllm_patchkit.git.invariants import INVARIANTS
from vllm_patchkit.git.series import (
    SeriesError,
    inside,
    load_series,
    parse_patch,
    series_entries,
)
from vllm_patchkit.paths import PATCHES_DIR


def test_real_series_has_the_fix_with_provenance() -> None:
    series = load_series()
    first = series.patches[0]
    assert first.name.startswith("0001-")
    assert first.subject == (
        "[Bugfix][ROCm] Preserve CPU query offsets during CUDA graph capture"
    )
    assert first.files == ("vllm/v1/attention/backends/rocm_attn.py",)
    for key in ("Origin", "Forwarded", "Signed-off-by"):  # DEP-3 provenance
        assert first.trailer(key) is not None, key
    assert first.trailer("Origin") == "backport, vllm-project/vllm#51585"
    assert first.trailer("Bug") == "vllm-project/vllm#25985"
    assert first.trailer(
        "Applied-Upstream",
    ).startswith("0.29.0")
    assert first.trailer("Signed-off-by")
    assert first.invariant in INVARIANTS


def test_real_patch_keeps_device_zeroing_and_drops_host_zeroing() -> None:
    text = load_series().patches[0].path.read_text()
    lines = text.splitlines()
    removed = [x for x in lines if x.startswith("-") and not x.startswith("---")]
    added = [x for x in lines if x.startswith("+") and not x.startswith("+++")]
    assert "-        common_attn_metadata.query_start_loc_cpu.zero_()" in removed
    assert not any("query_start_loc.zero_()" in x for x in removed + added)
    assert any("#25985" in x for x in added), "the comment must keep the bug reference"


def _series_dir(tmp_path: Path, series_text: str) -> Path:
    directory = tmp_path / "patches"
    directory.mkdir()
    for patch in PATCHES_DIR.glob("*.patch"):
        shutil.copy(patch, directory)
    (directory / "series").write_text(series_text)
    return directory


@pytest.mark.parametrize(
    ("series_text", "message"),
    [
        ("", "lists no patches"),
        ("# only a comment\n", "lists no patches"),
        ("missing.patch\n", "missing"),
        ("../outside.patch\n", "inside the patches directory"),
        ("0001-a.patch -p1\n", "one patch file name"),
        ("notapatch.txt\n", "*.patch"),
    ],
)
def test_malformed_series_is_rejected(
    tmp_path: Path, series_text: str, message: str
) -> None:
    with pytest.raises(SeriesError, match=message.replace("*", r"\*")):
        load_series(_series_dir(tmp_path, series_text))


def test_duplicate_entry_is_rejected(tmp_path: Path) -> None:
    name = next(PATCHES_DIR.glob("0001-*.patch")).name
    with pytest.raises(SeriesError, match="listed twice"):
        load_series(_series_dir(tmp_path, f"{name}\n{name}\n"))


def test_missing_series_file(tmp_path: Path) -> None:
    with pytest.raises(SeriesError, match="no series file"):
        load_series(tmp_path)


def _write_patch(tmp_path: Path, diff_path: str) -> Path:
    patch = tmp_path / "0001-x.patch"
    patch.write_text(
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: A <a@example.invalid>\n"
        "Subject: [PATCH] x\n"
        "\n"
        "body\n"
        "---\n"
        f"diff --git a/{diff_path} b/{diff_path}\n"
    )
    return patch


@pytest.mark.parametrize(
    ("diff_path", "message"),
    [
        ("../etc/passwd", "escapes"),
        (".git/config", "touches .git"),
        ("a/.git/hooks/x", ".git"),
    ],
)
def test_unsafe_patched_paths_are_rejected(
    tmp_path: Path, diff_path: str, message: str
) -> None:
    with pytest.raises(SeriesError, match=message):
        parse_patch(_write_patch(tmp_path, diff_path))


def test_not_a_format_patch_file(tmp_path: Path) -> None:
    bad = tmp_path / "0001-bad.patch"
    bad.write_text("--- a/x\n+++ b/x\n")
    with pytest.raises(SeriesError, match="not a git format-patch"):
        parse_patch(bad)


def test_patch_without_diff(tmp_path: Path) -> None:
    bad = tmp_path / "0001-bad.patch"
    bad.write_text("From 0 Mon Sep 17 00:00:00 2001\nSubject: x\n\nbody only\n")
    with pytest.raises(SeriesError, match="no '---' line"):
        parse_patch(bad)


def _series_with_edited_patch(tmp_path: Path, edit: Callable[[str], str]) -> Path:
    """The real series with the first patch's text edited."""
    directory = _series_dir(tmp_path, PATCHES_DIR.joinpath("series").read_text())
    first = sorted(directory.glob("0001-*.patch"))[0]
    first.write_text(edit(first.read_text()))
    return directory


def test_unknown_invariant_is_refused_naming_patch_and_trailer(
    tmp_path: Path,
) -> None:
    directory = _series_with_edited_patch(
        tmp_path,
        lambda text: text.replace(
            "Invariant: rocm-capture-zeroes-device-offsets-only",
            "Invariant: no-such-check",
        ),
    )
    with pytest.raises(SeriesError) as error:
        load_series(directory)
    assert "0001-" in str(error.value)
    assert "Invariant: no-such-check" in str(error.value)


def test_two_invariant_trailers_are_refused(tmp_path: Path) -> None:
    line = "Invariant: rocm-capture-zeroes-device-offsets-only"
    directory = _series_with_edited_patch(
        tmp_path, lambda text: text.replace(line, f"{line}\n{line}")
    )
    with pytest.raises(SeriesError, match="2 Invariant trailers"):
        load_series(directory)


def test_a_patch_file_holding_two_mails_is_refused(tmp_path: Path) -> None:
    """The series format is one mail (one commit) per file."""
    second = sorted(PATCHES_DIR.glob("0002-*.patch"))[0].read_text()
    directory = _series_with_edited_patch(tmp_path, lambda text: text + second)
    with pytest.raises(SeriesError, match="holds 2 mails") as error:
        load_series(directory)
    assert "0001-" in str(error.value)


def test_series_entries_keep_comments_and_blank_lines(tmp_path: Path) -> None:
    name = next(PATCHES_DIR.glob("0001-*.patch")).name
    text = f"# head\n  # indented\n\n{name}  # trailing\n"
    directory = _series_dir(tmp_path, text)
    assert series_entries(directory / "series") == [
        ("# head", None),
        ("  # indented", None),
        ("", None),
        (f"{name}  # trailing", name),
    ]


@pytest.mark.parametrize("name", ["../x.patch", "/tmp/x.patch", "..", "", "a/b.patch"])
def test_inside_refuses_names_that_leave_the_directory(
    tmp_path: Path, name: str
) -> None:
    with pytest.raises(SeriesError, match="outside the patches directory"):
        inside(tmp_path, name)


def test_inside_refuses_a_link_that_leads_out(tmp_path: Path) -> None:
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "0001-x.patch").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SeriesError, match="outside"):
        inside(tmp_path / "patches", "0001-x.patch")
    assert (
        inside(tmp_path / "patches", "0002-y.patch").parent
        == (tmp_path / "patches").resolve()
    )
