"""One ``git log`` for the series gives each patch its own ``git log``'s text.

:func:`vllm_patchkit.git.recent_diffs.recent_diffs` splits a log over every
patch's files; here it is compared, text for text, with one ``git log -p
--max-count=LIMIT HEAD -- FILES`` per patch (what ``history`` ran before),
on a real release checkout with the real series applied by ``git am`` and
commits touching one patch's files, two patches' files, a rename from one
patch's file to another's, and a merge git log shows, at limits that cut each patch's
window in every place.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import as_user
from vllm_patchkit.git.checkout import history
from vllm_patchkit.git.recent_diffs import recent_diffs
from vllm_patchkit.git.series import Patch, load_series
from vllm_patchkit.gitcmd import Git

pytestmark = pytest.mark.release_trees

LIMITS = (1, 2, 3, 4, 6, 200)


def own_logs(git: Git, patches: list[Patch], limit: int) -> dict[str, str]:
    return {
        p.name: git.commit_diffs(f"--max-count={limit}", "HEAD", "--", *p.files)
        for p in patches
    }


def append(git: Git, *paths: str, message: str) -> None:
    for path in paths:
        with (git.root / path).open("a") as file:
            file.write(f"# {message}\n")
    git.run("commit", "--quiet", "-am", message)


@pytest.fixture
def applied(release_clone: Callable[[str], Path]) -> tuple[Git, list[Patch]]:
    """0.28.0 with the series applied by ``git am``, then commits touching
    one patch's files, then two patches' files at once."""
    git = as_user(release_clone("0.28.0"))
    patches = list(load_series().patches)
    git.run("am", "--quiet", *(str(p.path) for p in patches))
    first, aiter, sink = patches[0].files[0], patches[2].files[1], patches[3].files[0]
    append(git, first, message="first alone")
    append(git, first, sink, message="first and sink")
    append(git, aiter, message="aiter")
    append(git, sink, first, message="sink and first again")
    return git, patches


def test_the_split_log_is_each_patch_s_own_log(
    applied: tuple[Git, list[Patch]],
) -> None:
    git, patches = applied
    for limit in LIMITS:
        assert recent_diffs(git, patches, limit) == own_logs(git, patches, limit), limit
    found = history(git, patches)
    assert found.applied == {p.name for p in patches}  # git am's commits


def test_a_rename_from_one_patch_s_file_to_another_s(
    applied: tuple[Git, list[Patch]],
) -> None:
    """git pairs a file of one patch with a file of another as a rename
    only when both are asked for: each patch then gets its own log."""
    git, patches = applied
    sink_test = patches[4].files[0]
    git.run("rm", "--quiet", sink_test)
    git.run("commit", "--quiet", "-m", "drop the sink test")
    git.run("mv", patches[1].files[0], sink_test)
    git.run("commit", "--quiet", "-m", "rename a test onto another's name")
    for limit in LIMITS:
        assert recent_diffs(git, patches, limit) == own_logs(git, patches, limit)


def test_a_merge_that_git_log_shows(applied: tuple[Git, list[Patch]]) -> None:
    """Both sides change 0001's file and the merge keeps both: it differs
    from each parent there, so git log shows it, without a diff, and counts
    it in the patch's window."""
    git, patches = applied
    first = git.root / patches[0].files[0]
    git.run("switch", "--quiet", "-c", "side", "HEAD~2")
    first.write_text(f"# side\n{first.read_text()}")
    git.run("commit", "--quiet", "-am", "side")
    git.run("switch", "--quiet", "-")
    append(git, patches[0].files[0], patches[3].files[0], message="main")
    git.run("merge", "--quiet", "--no-edit", "side")
    assert git.out("rev-list", "--count", "--merges", "HEAD") == "1"
    append(git, patches[0].files[0], message="after the merge")
    for limit in LIMITS:
        assert recent_diffs(git, patches, limit) == own_logs(git, patches, limit)
