"""A release checkout holds what upstream's git holds at the tag.

The checkout tree once took the sdist through vLLM's ``.gitignore``, which
matches files upstream tracks all the same (``*_hip*`` matches 0.34.0's
``mxfp4/rdna3_hip.py``, which the regression victims import): on a checkout
they could not run. The checkout is now every file of the sdist but what
the packaging wrote, so what upstream tracks is there and ``_version.py``
is not.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_patchkit.gitcmd import Git
from vllm_patchkit.trees.releases import (
    checkout_tree,
    packaging_generated,
    release_tree,
)

EGG_INFO_TAG = "[egg_info]\ntag_build = \ntag_date = 0\n\n"


def _sdist_like(root: Path, setup_cfg: str) -> Path:
    for relative in (
        "vllm/_version.py",
        "vllm/model_executor/kernels/linear/mxfp4/rdna3_hip.py",
        "vllm.egg-info/PKG-INFO",
        "PKG-INFO",
        "pyproject.toml",
    ):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text("x\n")
    (root / "setup.cfg").write_text(setup_cfg)
    return root


def test_the_packaging_files_are_named_and_nothing_upstream_tracks(
    tmp_path: Path,
) -> None:
    tree = _sdist_like(tmp_path, EGG_INFO_TAG)
    assert {p.relative_to(tree).as_posix() for p in packaging_generated(tree)} == {
        "vllm/_version.py",
        "PKG-INFO",
        "vllm.egg-info",
        "setup.cfg",
    }


def test_a_setup_cfg_with_more_than_the_build_tag_is_upstreams(
    tmp_path: Path,
) -> None:
    tree = _sdist_like(tmp_path, "[flake8]\nmax-line-length = 88\n\n" + EGG_INFO_TAG)
    assert tree / "setup.cfg" not in packaging_generated(tree)


@pytest.mark.release_trees
def test_the_0_34_0_checkout_is_the_sdist_but_its_packaging() -> None:
    release = set(Git(release_tree("0.34.0")).out("ls-files").splitlines())
    checkout_root = checkout_tree("0.34.0")
    checkout = set(Git(checkout_root).out("ls-files").splitlines())
    assert checkout < release
    gone = release - checkout
    assert "vllm/_version.py" in gone
    assert {"PKG-INFO", "setup.cfg"} <= gone
    assert all(
        path in ("vllm/_version.py", "PKG-INFO", "setup.cfg")
        or path.startswith("vllm.egg-info/")
        for path in gone
    ), sorted(gone)
    # Matched by vLLM's .gitignore (*_hip*), tracked upstream, imported by
    # the regression victims.
    assert "vllm/model_executor/kernels/linear/mxfp4/rdna3_hip.py" in checkout
    assert not (checkout_root / "vllm" / "_version.py").exists()
