"""check's trial application on a scratch index of only the patched paths.

The index holds HEAD's entries at, under and above the paths the patches
touch, not all of HEAD. Its answer must be the one a full index gives:
each case here is a real repository and a real ``git format-patch`` file,
classified by check and, as the oracle, tried with ``git apply --cached``
on a scratch index that ``git read-tree HEAD`` filled.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from vllm_patchkit.git.checkout import PatchState, classify
from vllm_patchkit.git.series import load_series
from vllm_patchkit.gitcmd import TOOL_IDENTITY, Git


def git(root: Path, *args: str) -> str:
    env = {**os.environ, **TOOL_IDENTITY}
    return subprocess.run(
        ["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True
    ).stdout


def repo(root: Path, files: dict[str, str]) -> Path:
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "README").write_text("base\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root


def one_patch_series(tmp_path: Path, change: Callable[[Path], None]) -> Path:
    """A series of one format-patch file: ``change`` made on a bare base."""
    source = repo(tmp_path / "source", {})
    change(source)
    git(source, "add", "-A")
    git(source, "commit", "-q", "-m", "[Bugfix] the change")
    patches = tmp_path / "patches"
    patches.mkdir()
    git(source, "format-patch", "-q", "-1", "-o", str(patches))
    (name,) = [p.name for p in patches.glob("*.patch")]
    (patches / "series").write_text(f"{name}\n")
    return patches


def full_index_answer(target: Path, patches: Path) -> bool:
    """Does the patch apply on a scratch index holding all of HEAD? (Not
    ``--check``: a file/directory conflict shows only when git adds the
    entry, as check's own trial does.)"""
    index = target.parent / "full-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    subprocess.run(["git", "read-tree", "HEAD"], cwd=target, env=env, check=True)
    (patch,) = patches.glob("*.patch")
    done = subprocess.run(
        ["git", "apply", "--cached", str(patch)],
        cwd=target,
        env=env,
        capture_output=True,
    )
    return done.returncode == 0


def write(name: str, text: str = "x = 1\n") -> Callable[[Path], None]:
    def change(root: Path) -> None:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)

    return change


CASES = {
    # name: (HEAD's files, the patch's change, applies?)
    "creates a new file": ({"pkg/a.py": "a\n"}, write("pkg/new.py"), True),
    "creates a file HEAD has": ({"pkg/a.py": "a\n"}, write("pkg/a.py"), False),
    "a parent is a file in HEAD": ({"pkg": "file\n"}, write("pkg/mod/b.py"), False),
    "the path is a directory in HEAD": (
        {"pkg/mod/c.py": "c\n"},
        write("pkg/mod"),
        False,
    ),
    "a deeper parent is a file": ({"a/b": "file\n"}, write("a/b/c/d.py"), False),
    "a sibling directory is no conflict": (
        {"pkg/mod/c.py": "c\n", "pkg/x": "x\n"},
        write("pkg/mod/d.py"),
        True,
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_the_partial_index_answers_as_a_full_one(tmp_path: Path, name: str) -> None:
    head_files, change, applies = CASES[name]
    patches = one_patch_series(tmp_path, change)
    target = repo(tmp_path / "target", head_files)
    assert full_index_answer(target, patches) is applies  # the oracle agrees

    (report,) = classify(Git(target), load_series(patches))

    expected = PatchState.APPLIES if applies else PatchState.CONFLICT
    assert report.status == expected, report.detail
    assert git(target, "status", "--porcelain", "--ignored") == ""
