"""Reading a release number the way vLLM's users have their trees."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_patchkit.gitcmd import Git, init_repo
from vllm_patchkit.trees.versions import (
    parse_range,
    parse_release,
    tree_release,
    version_release,
)


@pytest.mark.parametrize(
    ("text", "release"),
    [
        ("0.28.0", (0, 28, 0)),
        ("0.28.0+rocm700", (0, 28, 0)),
        ("0.10.1.1", (0, 10, 1, 1)),
        ("0.29.0rc1", None),
        ("0.17.1.dev2+gabc1234", None),
        ("v0.17.0-2-gabc1234", None),
        ("0.28", None),
    ],
)
def test_parse_release(text: str, release: tuple[int, ...] | None) -> None:
    assert parse_release(text) == release


@pytest.mark.parametrize(
    ("text", "release"),
    [
        ("0.17.1.dev2+gabc1234", (0, 17, 0)),
        ("0.10.1.2.dev3", (0, 10, 1, 1)),
        ("0.18.0.dev4", None),  # no release tag guesses X.Y.0 next
        ("0.29.0rc2.dev1", None),
        ("0.28.0", (0, 28, 0)),
    ],
)
def test_a_development_version_is_its_tag_s_release(
    text: str, release: tuple[int, ...] | None
) -> None:
    assert version_release(text) == release


def test_four_part_releases_order_between_their_neighbours() -> None:
    within = parse_range("0.10.1..0.10.2")
    assert (0, 10, 1, 1) in within
    assert (0, 10, 1) < (0, 10, 1, 1) < (0, 10, 2)


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

    assert tree_release(git.root) == ("0.10.1.1", (0, 10, 1, 1))


def test_version_file_naming_a_release_comes_first(tmp_path: Path) -> None:
    git = _repo(tmp_path)
    git.run("tag", "v0.12.0")
    (git.root / "vllm/_version.py").write_text("__version__ = '0.17.0'\n")

    assert tree_release(git.root) == ("0.17.0", (0, 17, 0))


def test_a_development_version_outside_git_maps_to_its_tag(tmp_path: Path) -> None:
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm/_version.py").write_text(
        "__version__ = version = '0.17.1.dev2+gabc1234'\n"
    )

    assert tree_release(tmp_path) == ("0.17.1.dev2+gabc1234", (0, 17, 0))


def test_no_version_and_no_tag_is_unknown(tmp_path: Path) -> None:
    git = _repo(tmp_path)
    git.run("tag", "fork-1")

    assert tree_release(git.root) == ("unknown", None)
