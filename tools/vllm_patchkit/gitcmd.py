"""A small typed wrapper around the git command line.

Every call goes through :func:`Git.run`, which fixes the environment (no
pager, no user config surprises, C locale) so that output can be parsed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Identity used for commits the toolkit makes in trees it owns (release
# trees, scratch copies). Commits in a user's checkout keep the user's own.
TOOL_IDENTITY = {
    "GIT_AUTHOR_NAME": "vllm-patchkit",
    "GIT_AUTHOR_EMAIL": "vllm-patchkit@localhost",
    "GIT_COMMITTER_NAME": "vllm-patchkit",
    "GIT_COMMITTER_EMAIL": "vllm-patchkit@localhost",
}


class GitError(RuntimeError):
    """A git command failed; carries its arguments and output."""

    def __init__(self, args: list[str], returncode: int, stdout: str, stderr: str):
        self.args_ = args
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        detail = (stderr or stdout).strip()
        super().__init__(f"git {' '.join(args)} failed ({returncode}): {detail}")


class GitMissingError(RuntimeError):
    """git is not on PATH."""


def git_executable() -> str:
    path = shutil.which("git")
    if path is None:
        raise GitMissingError("git was not found on PATH; install git and retry")
    return path


@dataclass(frozen=True)
class Git:
    """git bound to one working tree."""

    root: Path
    extra_env: tuple[tuple[str, str], ...] = ()
    _facts: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def run(
        self,
        *args: str,
        check: bool = True,
        input_text: str | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        full_env = {
            **os.environ,
            "GIT_PAGER": "cat",
            "LC_ALL": "C",
            "GIT_TERMINAL_PROMPT": "0",
            **dict(self.extra_env),
            **(env or {}),
        }
        proc = subprocess.run(
            [git_executable(), *args],
            cwd=self.root,
            env=full_env,
            input=input_text,
            capture_output=True,
            text=True,
        )
        if check and proc.returncode != 0:
            raise GitError(list(args), proc.returncode, proc.stdout, proc.stderr)
        return proc

    def out(self, *args: str) -> str:
        return self.run(*args).stdout.strip()

    def toplevel(self) -> Path | None:
        """The repository's top level, or None when root is not in a work tree."""
        proc = self.run("rev-parse", "--show-toplevel", check=False)
        return Path(proc.stdout.strip()) if proc.returncode == 0 else None

    def head(self) -> str:
        return self.out("rev-parse", "--verify", "HEAD")

    def commit_of(self, rev: str) -> str | None:
        """The commit ``rev`` names, or None when it names none."""
        proc = self.run(
            "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False
        )
        return proc.stdout.strip() if proc.returncode == 0 else None

    def branch(self) -> str | None:
        """The checked-out branch, or None on a detached HEAD."""
        proc = self.run("symbolic-ref", "--quiet", "--short", "HEAD", check=False)
        return proc.stdout.strip() or None

    def status_porcelain(self, untracked: bool = True) -> str:
        # "normal" lists an untracked directory as one entry instead of
        # walking it: enough to know the tree is not clean, and much faster.
        mode = "--untracked-files=normal" if untracked else "--untracked-files=no"
        return self.run("status", "--porcelain=v1", "-z", mode).stdout

    def is_clean(self) -> bool:
        """No staged, unstaged or untracked changes (ignored files don't count)."""
        return self.status_porcelain() == ""

    def git_dir(self) -> Path:
        """This work tree's git directory (fixed for the object's lifetime)."""
        if "git_dir" not in self._facts:
            self._facts["git_dir"] = Path(self.out("rev-parse", "--absolute-git-dir"))
        return self._facts["git_dir"]


def init_repo(path: Path, *, initial_branch: str = "main") -> Git:
    path.mkdir(parents=True, exist_ok=True)
    git = Git(path, tuple(TOOL_IDENTITY.items()))
    git.run("init", "--quiet", f"--initial-branch={initial_branch}")
    # Release trees and scratch copies must not inherit a user's hooks,
    # autocrlf or signing settings.
    git.run("config", "core.autocrlf", "false")
    git.run("config", "commit.gpgsign", "false")
    return git
