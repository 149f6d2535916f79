"""Every place the toolkit reads a release string reads it one way.

:mod:`vllm_overlay.releases` is the one parser; these are its call
sites, each given what the old per-site parsers took wrongly: ``git
describe`` output and development versions as release trees to download,
two-part or zero-padded ``--from``/``--to``, and four-part releases.
"""

from __future__ import annotations

import pytest

from vllm_overlay.releases import parse_release
from vllm_patchkit.commands.matrix import MatrixRangeError, check_range
from vllm_patchkit.errors import InputError
from vllm_patchkit.git.series import Series
from vllm_patchkit.trees.releases import check_version


@pytest.mark.parametrize(
    "version",
    ["0.17.0-2-gabc1234", "0.28.0.dev1", "0.28.0+rocm700", "0.28", "v0.28.0"],
)
def test_a_release_tree_is_refused_for_what_is_not_a_release(version: str) -> None:
    """Refused (exit 2) before the index is asked; the old pattern let
    ``git describe`` output and development versions through to a download."""
    with pytest.raises(InputError):
        check_version(version)


def test_release_trees_take_four_part_releases() -> None:
    assert check_version("0.10.1.1") == "0.10.1.1"


@pytest.mark.parametrize(
    ("first", "last"), [("0.28", "0.29.0"), ("0.28.0", "0.29"), ("0.028.0", "latest")]
)
def test_matrix_refuses_what_is_not_a_release(first: str, last: str) -> None:
    with pytest.raises(MatrixRangeError, match="is not a vLLM release version"):
        check_range(first, last)


def test_matrix_orders_four_part_releases() -> None:
    check_range("0.10.1", "0.10.1.1")
    with pytest.raises(MatrixRangeError, match="comes before"):
        check_range("0.10.1.1", "0.10.1")


def test_affects_trailers_read_four_part_releases(series: Series) -> None:
    """The series reads ``Affects:`` through the parser: 0.10.1.1 (a real
    four-part release) falls before every range of the series."""
    release = parse_release("0.10.1.1")
    assert release is not None
    assert not any(p.carried_for(release) for p in series.patches if p.affects)
