"""doctor's entry-point lookup says what ``importlib.metadata`` says.

``vllm_overlay.entry_points.entry_point_registered`` (the overlay's doctor
and the toolkit's) reads ``entry_points.txt`` files itself (importing
importlib.metadata cost doctor a third of its start-up);
importlib.metadata, the library vLLM's plugin loader uses, is the oracle:
on this environment's real ``sys.path``, and on distributions made here,
one shadowing another of the same name.
"""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest

from vllm_overlay.entry_points import (
    ENTRY_POINT_GROUP,
    ENTRY_POINT_NAME,
    entry_point_registered,
)

OVERLAY_ENTRY_POINT = (ENTRY_POINT_GROUP, ENTRY_POINT_NAME)

GROUP = "vllm.general_plugins"


def _oracle(group: str, name: str) -> bool:
    return any(ep.name == name for ep in importlib.metadata.entry_points(group=group))


def _distribution(site: Path, directory: str, entry_points: str) -> None:
    info = site / directory
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {directory.split('-')[0]}\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(entry_points)


def test_the_overlay_is_registered_here_as_importlib_metadata_says() -> None:
    assert entry_point_registered(*OVERLAY_ENTRY_POINT) is True
    assert _oracle(*OVERLAY_ENTRY_POINT) is True
    assert entry_point_registered(GROUP, "no_such_plugin") is False
    assert _oracle(GROUP, "no_such_plugin") is False


def test_made_distributions_agree_with_importlib_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    # The first distribution named "shadowed" wins: its twin later on the
    # path declares "hidden", which neither lookup may see.
    _distribution(first, "shadowed-1.0.dist-info", f"[{GROUP}]\nseen = a.b:c\n")
    _distribution(second, "Shadowed-2.0.dist-info", f"[{GROUP}]\nhidden = a.b:c\n")
    _distribution(
        second,
        "Other.Pkg-3.0.dist-info",
        "# a comment\n[console_scripts]\nwrong_group = a:b\n\n"
        f"[{GROUP}]\n  spaced   =   a.b:c  \n# another comment\n",
    )
    _distribution(second, "legacy.egg-info", f"[{GROUP}]\nfrom_egg = a:b\n")
    monkeypatch.setattr(sys, "path", [str(first), str(second)])
    names = ["seen", "hidden", "wrong_group", "spaced", "from_egg", "absent"]
    for group in (GROUP, "console_scripts"):
        ours = {n for n in names if entry_point_registered(group, n)}
        theirs = {n for n in names if _oracle(group, n)}
        assert ours == theirs, group
    assert {n for n in names if entry_point_registered(GROUP, n)} == {
        "seen",
        "spaced",
        "from_egg",
    }
