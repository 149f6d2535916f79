"""The whole state of a checkout, for fault tests that must find it unchanged.

The one helper for every test that compares a checkout (or, with
:func:`directory_state`, any directory) before and after a run:
HEAD, branch, index entries, every ref, the stash, the worktrees git knows,
``git status`` (untracked and ignored files one by one), every file and
empty directory of the work tree (tracked, untracked and ignored; symlinks
by target), and every file of the git directory that records state
(``MERGE_HEAD``, ``rebase-apply/``, ``FETCH_HEAD``, ``ORIG_HEAD``,
``worktrees/``, reflogs, config, hooks, the toolkit's journal ...).

Left out: objects (a run may add unreferenced ones, which change nothing),
the index file's own bytes (``git status`` refreshes its stat data; its
entries are compared) and the toolkit's empty lock file. After a run that
may have rolled back, ``rolled_back=True`` also leaves out what every ``git
reset`` rewrites, its own included: ``ORIG_HEAD`` and the reflogs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from vllm_patchkit.gitcmd import Git

NOT_STATE = {"objects", "index", "vllm-patchkit/lock"}
REWRITTEN_BY_RESET = ("ORIG_HEAD", "logs")
"""What any ``git reset`` (a verified rollback's too) writes: the previous
HEAD and a reflog entry. HEAD, the branch and the refs are compared."""


def _files(top: Path, skip: Any) -> dict[str, bytes | str]:
    """Every file under ``top`` by content, symlinks by target, and empty
    directories, except the relative paths ``skip`` says."""
    found: dict[str, bytes | str] = {}
    for path in sorted(top.rglob("*")):
        relative = path.relative_to(top).as_posix()
        if skip(relative):
            continue
        if path.is_symlink():
            found[relative] = f"-> {os.readlink(path)}"
        elif path.is_file():
            found[relative] = path.read_bytes()
        elif path.is_dir() and not any(path.iterdir()):
            found[relative] = "(empty directory)"
    return found


def checkout_state(root: Path, *, rolled_back: bool = False) -> dict[str, Any]:
    """The checkout's whole state; see the module docstring."""
    git = Git(root)
    git_dir = Path(git.out("rev-parse", "--absolute-git-dir"))
    left_out = REWRITTEN_BY_RESET if rolled_back else ()

    def not_state(relative: str) -> bool:
        top = relative.split("/", 1)[0]
        return relative in NOT_STATE or top == "objects" or top in left_out

    def in_git_dir(relative: str) -> bool:
        return relative.split("/", 1)[0] == ".git"

    return {
        "head": git.head(),
        "branch": git.branch(),
        "index": git.run("ls-files", "--stage").stdout,
        "status": git.run(
            "status", "--porcelain=v1", "-z", "--ignored", "--untracked-files=all"
        ).stdout,
        "stash": git.run("stash", "list", "--format=%H %gs").stdout,
        "refs": git.run("for-each-ref", "--format=%(refname) %(objectname)").stdout,
        "worktrees": git.run("worktree", "list", "--porcelain").stdout,
        "work_tree": _files(root, in_git_dir),
        "git_dir": _files(git_dir, not_state),
    }


OPERATION_STATE = (
    "rebase-apply",
    "rebase-merge",
    "MERGE_HEAD",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "BISECT_LOG",
    "BISECT_START",
    "index.lock",
    "vllm-patchkit/journal.json",
)
"""The git-dir files of an operation in progress (the toolkit's journal too)."""


def without_operation_state(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` as if no operation were in progress: for a snapshot taken
    while a run has its ``git am`` and journal open, which must be gone
    (and nothing else changed) once the run has rolled back."""
    git_dir = {
        name: value
        for name, value in state["git_dir"].items()
        if not any(name == x or name.startswith(x + "/") for x in OPERATION_STATE)
    }
    return {**state, "git_dir": git_dir}


def snapshot(root: Path) -> dict[str, Any]:
    """:func:`checkout_state` after a run that may have rolled back."""
    return checkout_state(root, rolled_back=True)


def directory_state(root: Path) -> dict[str, Any]:
    """Every path under ``root`` (``.git`` included, if any) by mode and
    content: for a directory that need not be a checkout."""
    return {
        "files": _files(root, lambda relative: False),
        "modes": {
            path.relative_to(root).as_posix(): path.lstat().st_mode
            for path in sorted(root.rglob("*"))
        },
    }


def git_dir_bytes(root: Path) -> dict[str, bytes | str]:
    """Every file under .git, objects included, byte for byte: for "nothing
    was written"."""
    return _files(root / ".git", lambda relative: False)


def lived_in(root: Path) -> None:
    """Give a clean checkout the state a user's has besides commits: an
    ignored file, a stash entry, a tag, another branch (none of which makes
    the tree dirty, so a run is not refused for it)."""
    git = Git(root)
    (root / ".git" / "info" / "exclude").write_text("*.ignored\n")
    (root / "notes.ignored").write_text("ignored, but mine\n")
    readme = root / "README.md"
    original = readme.read_bytes()
    readme.write_bytes(original + b"\nstashed edit\n")
    git.run("stash", "push", "--quiet", "-m", "my stash")
    git.run("tag", "my-tag")
    git.run("branch", "my-other-branch")
