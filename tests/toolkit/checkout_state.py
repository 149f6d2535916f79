"""The whole state of a checkout, for fault tests that must find it unchanged.

HEAD, branch, index, every file of the work tree (tracked, untracked and
ignored), the stash, every ref, the worktrees git knows, and the files of
the git directory that record state (``MERGE_HEAD``, ``rebase-apply/``,
``FETCH_HEAD``, ``ORIG_HEAD``, ``worktrees/``, reflogs, config, hooks ...).
Objects are left out (a run may add unreferenced ones, which change
nothing), and so is the index file's own bytes (``git status`` refreshes
its stat data; its entries are compared), and the toolkit's empty lock file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vllm_patchkit.gitcmd import Git

NOT_STATE = {"objects", "index", "vllm-patchkit/lock"}


def checkout_state(root: Path) -> dict[str, Any]:
    git = Git(root)
    git_dir = Path(git.out("rev-parse", "--absolute-git-dir"))
    work_tree = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if relative.parts[0] == ".git" or path.is_dir():
            continue
        work_tree[str(relative)] = (
            path.readlink() if path.is_symlink() else path.read_bytes()
        )
    git_files = {}
    for path in sorted(git_dir.rglob("*")):
        relative = path.relative_to(git_dir).as_posix()
        if path.is_dir() or relative in NOT_STATE or relative.startswith("objects/"):
            continue
        git_files[relative] = path.read_bytes()
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
        "work_tree": work_tree,
        "git_dir": git_files,
    }


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
