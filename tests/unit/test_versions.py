"""Reading a release number the way vLLM's users have their trees.

:mod:`vllm_patchkit.trees.versions` is the toolkit's one reader of release
strings; its call sites are checked in ``test_release_call_sites.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_overlay.releases import parse_release, version_release
from vllm_patchkit.errors import InputError
from vllm_patchkit.gitcmd import Git, init_repo
from vllm_patchkit.trees.versions import (
    parse_range,
    parse_tag,
    require_release,
    tree_release,
)


def _text(release: object) -> str | None:
    return None if release is None else str(release)


@pytest.mark.parametrize(
    ("text", "release"),
    [
        ("0.28.0", "0.28.0"),
        ("0.28.0+rocm700", "0.28.0"),
        ("0.10.1.1", "0.10.1.1"),
        ("0.29.0rc1", None),
        ("0.17.1.dev2+gabc1234", None),
        ("0.6.4.post1", None),
        ("0.6.4.post0", None),  # post 0 is a post-release too
        ("0.28.0rc0", None),
        ("v0.17.0", None),  # a tag: parse_tag
        ("v0.17.0-2-gabc1234", None),  # git describe output
        ("0.17.0-2-gabc1234", None),
        ("0.17.0-2", None),  # PEP 440 reads a post-release; vLLM has none
        ("0.28", None),
        ("1.2.3.4.5", None),
        ("0.028.0", None),  # PEP 440 normalises it; not how a release is written
        ("1!0.28.0", None),
        (" 0.28.0", None),
        ("", None),
        ("banana", None),
    ],
)
def test_parse_release(text: str, release: str | None) -> None:
    assert _text(parse_release(text)) == release


@pytest.mark.parametrize(
    ("tag", "release"),
    [
        ("v0.17.0", "0.17.0"),
        ("v0.10.1.1", "0.10.1.1"),
        ("0.17.0", None),
        ("v0.17.0rc1", None),
        ("v0.17.0+local", None),
        ("v0.17.0-2-gabc1234", None),
    ],
)
def test_parse_tag(tag: str, release: str | None) -> None:
    assert _text(parse_tag(tag)) == release


@pytest.mark.parametrize(
    ("text", "release"),
    [
        ("0.17.1.dev2+gabc1234", "0.17.0"),
        ("0.10.1.2.dev3", "0.10.1.1"),
        ("0.18.0.dev4", None),  # no release tag guesses X.Y.0 next
        ("0.29.0rc2.dev1", None),
        ("0.28.0", "0.28.0"),
        ("v0.17.0-2-gabc1234", None),
    ],
)
def test_a_development_version_is_its_tag_s_release(
    text: str, release: str | None
) -> None:
    assert _text(version_release(text)) == release


def test_a_development_version_comes_after_its_tag_s_release() -> None:
    """``0.17.1.dev2`` is two commits past ``v0.17.0``: inside a range that
    starts at 0.17.0, outside one that ends at 0.16.0."""
    release = version_release("0.17.1.dev2+gabc1234")
    assert release is not None
    assert release in parse_range("0.17.0..")
    assert release not in parse_range("0.11.0..0.16.0")


def test_releases_order_by_number_not_by_text() -> None:
    ordered = ["0.9.2", "0.10.0", "0.10.1", "0.10.1.1", "0.10.2", "0.11.0", "1.0.0"]
    releases = [require_release(text) for text in ordered]
    assert sorted(reversed(releases)) == releases
    assert sorted(ordered) != ordered  # as text, 0.9.2 would come last
    assert require_release("0.28.0+rocm700") == require_release("0.28.0")


def test_four_part_releases_order_between_their_neighbours() -> None:
    within = parse_range("0.10.1..0.10.2")
    assert require_release("0.10.1.1") in within
    assert require_release("0.10.1.1") not in parse_range("0.10.2..")
    assert require_release("0.10.1.1") not in parse_range("0.9.0..0.10.1")


def test_ranges() -> None:
    closed = parse_range("0.14.0..0.33.0")
    assert str(closed) == "0.14.0..0.33.0"
    assert require_release("0.14.0") in closed and require_release("0.33.0") in closed
    assert require_release("0.13.0") not in closed
    assert require_release("0.34.0") not in closed
    open_end = parse_range("0.14.0..")
    assert str(open_end) == "0.14.0.." and require_release("9.0.0") in open_end
    assert parse_range(" 0.11.1 .. 0.28.0 ") == parse_range("0.11.1..0.28.0")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0.33.0..0.14.0", "the range ends before it starts"),
        ("0.14.0-0.33.0", "is not a release range such as 0.11.1..0.28.0"),
        ("0.14.0", "is not a release range"),
        ("..0.33.0", "is not a release range"),
        ("0.14..0.33.0", "is not a release range"),
        ("0.14.0..0.33.0rc1", "is not a release range"),
        ("v0.14.0..", "is not a release range"),
        ("0.14.0..v0.33.0", "is not a release range"),
    ],
)
def test_malformed_affects_ranges_are_refused(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_range(text)


def test_a_refused_release_says_what_one_looks_like() -> None:
    with pytest.raises(InputError) as caught:
        require_release("v0.17.0-2-gabc1234", "--from")
    assert str(caught.value) == (
        "--from 'v0.17.0-2-gabc1234' is not a vLLM release such as 0.28.0 or "
        "0.10.1.1 (no v, pre-release, development version or git describe output)"
    )


def _repo(tmp_path: Path) -> Git:
    git = init_repo(tmp_path / "tree")
    (git.root / "vllm").mkdir()
    (git.root / "vllm/__init__.py").write_text("")
    git.run("add", "-A")
    git.run("commit", "-qm", "base")
    return git


def test_a_checkout_is_the_nearest_release_tag_under_its_commits(
    tmp_path: Path,
) -> None:
    git = _repo(tmp_path)
    git.run("tag", "v0.10.1.1")
    (git.root / "a").write_text("a")
    git.run("add", "a")
    git.run("commit", "-qm", "a")
    git.run("tag", "v0.11.0rc1")  # nearer, but not a release
    git.run("commit", "-q", "--allow-empty", "-m", "user's own")

    assert tree_release(git.root) == ("0.10.1.1", require_release("0.10.1.1"))


def test_version_file_naming_a_release_comes_first(tmp_path: Path) -> None:
    git = _repo(tmp_path)
    git.run("tag", "v0.12.0")
    (git.root / "vllm/_version.py").write_text("__version__ = '0.17.0'\n")

    assert tree_release(git.root) == ("0.17.0", require_release("0.17.0"))


def test_a_development_version_outside_git_maps_to_its_tag(tmp_path: Path) -> None:
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm/_version.py").write_text(
        "__version__ = version = '0.17.1.dev2+gabc1234'\n"
    )

    assert tree_release(tmp_path) == (
        "0.17.1.dev2+gabc1234",
        require_release("0.17.0"),
    )


def test_no_version_and_no_tag_is_unknown(tmp_path: Path) -> None:
    git = _repo(tmp_path)
    git.run("tag", "fork-1")

    assert tree_release(git.root) == ("unknown", None)
