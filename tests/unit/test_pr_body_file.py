"""Two checkouts preparing a PR for one fix keep two bodies (issue 50, item 7).

``pr`` wrote ``<cache>/pr/<branch>.md``: every checkout preparing the same
fix's PR shares the branch name, so one's body replaced the other's under
the ``gh pr create --body-file`` the first had printed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_patchkit.pull_request import PullRequest
from vllm_patchkit.pull_request.body import write_body

BRANCH = "vllm-overlay/keep-the-shared-seq-lens-in-staticsinkattentionb"


def test_two_checkouts_preparing_one_fix_keep_two_bodies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_OVERLAY_CACHE", str(tmp_path / "cache"))
    one, two = tmp_path / "one" / "vllm", tmp_path / "two" / "vllm"
    for checkout in (one, two):
        checkout.mkdir(parents=True)

    def write(checkout: Path, body: str) -> Path:
        pr = PullRequest("ready", "", str(checkout), branch=BRANCH, body=body)
        return write_body(Path(pr.checkout), pr.branch, pr.body)

    first = write(one, "from one")
    second = write(two, "from two")

    assert first != second
    assert first.read_text() == "from one" and second.read_text() == "from two"
    assert write(one, "from one, again") == first, "a checkout's file moved"
    assert first.is_relative_to(tmp_path / "cache" / "pr")
