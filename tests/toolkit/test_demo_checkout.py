"""The main job on a user's vLLM checkout: fixed on a branch, nothing else touched.

(Separate from test_demo.py so the two long demo runs can go to different
pytest-xdist workers.)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import patchkit
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.series import load_series

pytestmark = pytest.mark.release_trees


def test_demo_on_a_user_checkout_keeps_it_as_it_was(
    release_clone: Callable[[str], Path],
) -> None:
    checkout = release_clone("0.28.0")
    git = Git(checkout)
    head, branch = git.head(), git.branch()

    proc = patchkit("demo", str(checkout))

    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "verdict: FIXED" in proc.stdout
    assert "the crash of vLLM #51585 reproduces" in proc.stdout
    assert (git.head(), git.branch(), git.status_porcelain()) == (head, branch, "")
    series_length = str(len(load_series().patches))
    assert (
        git.out("rev-list", "--count", "v0.28.0..vllm-overlay/fix-51585")
        == series_length
    )
    assert git.out("worktree", "list", "--porcelain").count("worktree ") == 1
    assert not list(checkout.rglob("__pycache__"))
