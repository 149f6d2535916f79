"""The paths a dirty checkout names, read from ``git status --porcelain -z``.

One parser serves the refusals of apply and rebase (``dirty_reason``), the
journal's "uncommitted changes" and the owned-directory records. In ``-z``
form a rename or copy is two fields, the new name after the status and then
the source with no status of its own: a parser that read every field as
``XY path`` showed a staged rename's source with three characters cut off.
"""

from __future__ import annotations

from pathlib import Path

from vllm_patchkit.git.checkout import dirty_reason
from vllm_patchkit.gitcmd import Git, init_repo


def _repo(tmp_path: Path) -> Git:
    git = init_repo(tmp_path / "repo")
    for name in ("old name.py", "kept.py", "other.py"):
        (git.root / name).write_text(f"# {name}\n")
    git.run("add", ".")
    git.run("commit", "-qm", "files")
    return git


def test_a_clean_checkout_names_nothing(tmp_path: Path) -> None:
    git = _repo(tmp_path)
    assert git.changed_paths() == []
    assert dirty_reason(git) is None


def test_a_staged_rename_is_named_once_by_its_new_name(tmp_path: Path) -> None:
    git = _repo(tmp_path)
    git.run("mv", "old name.py", "new name.py")
    (git.root / "kept.py").write_text("# changed\n")
    (git.root / "untracked.txt").write_text("new\n")

    assert sorted(git.changed_paths()) == ["kept.py", "new name.py", "untracked.txt"]
    assert sorted(git.changed_paths(untracked=False)) == ["kept.py", "new name.py"]
    # Not " name.py" (the source cut by three characters) beside them.
    assert dirty_reason(git) == (
        "uncommitted changes or untracked files: kept.py, new name.py, untracked.txt"
    )


def test_more_than_five_are_counted(tmp_path: Path) -> None:
    git = _repo(tmp_path)
    for index in range(7):
        (git.root / f"u{index}.txt").write_text("x\n")
    assert dirty_reason(git) == (
        "uncommitted changes or untracked files: "
        "u0.txt, u1.txt, u2.txt, u3.txt, u4.txt and 2 more"
    )
