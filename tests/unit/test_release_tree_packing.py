"""A cached release tree is published packed.

Built by one ``git commit`` of some 7,000 files, a tree left as loose
objects would have its clones' first commit (``apply``'s ``git am``) start a
background ``git gc`` that rewrites the clone's git directory while a test
(or a user's command) reads it: the flake that made a cold run's
``test_the_series_passes_and_its_test_fails_on_the_base`` see its checkout
change under ``test``. The cache packs each tree before publishing it, and
the repositories the toolkit makes never start a gc of their own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_patchkit.gitcmd import Git, init_repo
from vllm_patchkit.trees.releases import checkout_tree, clone_release


def _loose_objects(tree: Path) -> int:
    counts = dict(
        line.split(": ", 1)
        for line in Git(tree).out("count-objects", "-v").splitlines()
    )
    return int(counts["count"])


@pytest.mark.release_trees
def test_a_release_checkout_and_its_clone_start_with_no_loose_object(
    tmp_path: Path,
) -> None:
    assert _loose_objects(checkout_tree("0.28.0")) == 0
    clone = clone_release("0.28.0", tmp_path / "vllm", checkout=True)
    assert _loose_objects(clone.root) == 0


def test_a_repository_the_toolkit_makes_starts_no_background_gc(
    tmp_path: Path,
) -> None:
    git = init_repo(tmp_path / "scratch")
    assert git.out("config", "--get", "gc.auto") == "0"
    assert git.out("config", "--get", "--type=bool", "maintenance.auto") == "false"
