"""Directories the toolkit made, and the rule that it replaces only those.

A directory the toolkit creates at a path the user chose (the demo's
release clone and its ``--workdir``, an upstream built at ``--dest``) is
recorded outside the tree, under the cache's ``owned/``, keyed by its
resolved path and inode: with the commits it left there and, for a work
tree, its untracked and ignored files. Nothing inside a tree is trusted,
since a fork can track any file and a worktree shares its fork's files.

Even a recorded directory is replaced only while it holds nothing the
toolkit did not make: a commit reachable from any ref, HEAD or reflog entry
that it did not leave (a commit reset away lives on in the reflog alone), a
remote it did not add, a changed tracked file, a new or changed untracked or ignored
file, a linked worktree, a stray file in a bare repository. Otherwise, and
for any non-empty directory it has no record of (a user's checkout, a
worktree, a submodule), the command refuses before changing anything
(exit 2), naming what it found.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

from vllm_patchkit.errors import InputError
from vllm_patchkit.git.revs import OBJECT_ID
from vllm_patchkit.gitcmd import Git, GitError
from vllm_patchkit.paths import cache_dir, write_atomic

SHOWN = 10
"""How many commits or paths a refusal names before it counts the rest."""

BARE_LAYOUT = frozenset(
    {
        "HEAD",
        "config",
        "description",
        "hooks",
        "info",
        "objects",
        "refs",
        "packed-refs",
        "logs",
        "FETCH_HEAD",
        "ORIG_HEAD",
        "branches",
        "shallow",
        "worktrees",
        "vllm-patchkit",
    }
)
"""What git (and the toolkit's token) keeps at the top of a bare repository."""

TOKEN = "vllm-patchkit/owned-token"
"""In the git directory: a random token that must equal the record's, so that
a repository made anew at a recorded path (same inode, even) is not taken
for the recorded one. Never trusted without the record."""


class NotOwnedError(InputError):
    """A path the toolkit did not create holds something; nothing was changed."""


def _record_file(path: Path) -> Path:
    key = hashlib.sha256(os.fsencode(path.resolve())).hexdigest()
    return cache_dir() / "owned" / f"{key}.json"


def _identity(path: Path) -> list[int]:
    info = path.stat()
    return [info.st_dev, info.st_ino]


def _git_kind(path: Path) -> str:
    """``work tree`` (its own ``.git`` directory), ``bare``, ``linked``
    (``.git`` a file or link: a worktree or submodule of another
    repository) or ``directory`` (not a repository)."""
    dot_git = path / ".git"
    if dot_git.is_symlink() or (dot_git.exists() and not dot_git.is_dir()):
        return "linked"
    if dot_git.is_dir():
        return "work tree"
    if (path / "HEAD").is_file() and (path / "objects").is_dir():
        return "bare"
    return "directory"


def _token_file(path: Path, kind: str) -> Path | None:
    if kind == "work tree":
        return path / ".git" / TOKEN
    return path / TOKEN if kind == "bare" else None


def _read_token(path: Path, kind: str) -> str | None:
    token = _token_file(path, kind)
    if token is None or token.is_symlink() or not token.is_file():
        return None
    return token.read_text().strip()


def _tips(git: Git) -> list[str]:
    """Every object a ref names, HEAD's commit and every commit a reflog
    entry names: what the toolkit left."""
    refs = git.run("for-each-ref", "--format=%(objectname)").stdout.split()
    # No reflog at all (a bare repository keeps none) is a usage error to
    # git; fewer tips only makes more of a repository the user's.
    proc = git.run("rev-list", "--no-walk", "--reflog", "--", check=False)
    logged = proc.stdout.split() if proc.returncode == 0 else []
    head = git.commit_of("HEAD")
    return sorted(set(refs) | set(logged) | ({head} if head else set()))


def _remotes(git: Git) -> list[str]:
    """The repository's remotes as ``remote.NAME.KEY VALUE`` config lines."""
    proc = git.run("config", "--get-regexp", r"^remote\.", check=False)
    return sorted(proc.stdout.splitlines())


def _other_files(git: Git, root: Path) -> dict[str, list[int]]:
    """Untracked and ignored files of a work tree, by size and mtime."""
    names = git.run("ls-files", "--others", "-z").stdout.split("\0")
    files: dict[str, list[int]] = {}
    for name in filter(None, names):
        info = (root / name).lstat()
        files[name] = [info.st_size, info.st_mtime_ns]
    return files


def record(path: Path, what: str) -> None:
    """Remember, outside the tree, that the toolkit made ``path`` (an
    existing directory) and what it left there; call again after each
    change the toolkit makes, so that later checks compare with it."""
    kind = _git_kind(path)
    entry: dict[str, Any] = {
        "path": str(path.resolve()),
        "what": what,
        "kind": kind,
        "identity": _identity(path),
        "tips": [],
        "files": {},
        "remotes": [],
    }
    token = _token_file(path, kind)
    if token is not None:
        entry["token"] = secrets.token_hex(16)
        token.parent.mkdir(exist_ok=True)
        token.write_text(entry["token"] + "\n")
        git = Git(path)
        entry["tips"] = _tips(git)
        entry["remotes"] = _remotes(git)
        if kind == "work tree":
            entry["files"] = _other_files(git, path)
    target = _record_file(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    _forget_gone(target.parent)
    write_atomic(target, json.dumps(entry), prefix=".record-")


def _forget_gone(records: Path) -> None:
    """Drop the records of directories that no longer exist (a test's
    scratch paths, clones the user removed), so that the store stays small."""
    for old in records.glob("*.json"):
        try:
            gone = not Path(json.loads(old.read_text())["path"]).exists()
        except (OSError, ValueError, KeyError, TypeError):
            gone = True  # unreadable: worth nothing
        if gone:
            old.unlink(missing_ok=True)


def _recorded(path: Path) -> dict[str, Any] | None:
    """The record of ``path``, if it is still the directory recorded (not
    one made anew at the same path since)."""
    try:
        entry = json.loads(_record_file(path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("identity") != _identity(path):
        return None
    if entry.get("remotes") is None:  # absent from an older record: none known
        entry["remotes"] = []
    tips, files, remotes = entry.get("tips"), entry.get("files"), entry["remotes"]
    if not (isinstance(files, dict) and isinstance(tips, list)):
        return None
    if not isinstance(remotes, list) or not all(
        isinstance(item, str) for item in [*tips, *remotes]
    ):
        return None
    kind = _git_kind(path)
    if entry.get("kind") != kind:
        return None
    if _token_file(path, kind) and entry.get("token") != _read_token(path, kind):
        return None
    return entry


def _named(label: str, items: list[str]) -> str:
    shown = items[:SHOWN]
    rest = len(items) - len(shown)
    return f"{label}: " + ", ".join(shown) + (f" and {rest} more" if rest else "")


def _new_commits(git: Git, made: Iterable[str]) -> list[str]:
    """Commits reachable from any ref, HEAD, worktree HEAD or reflog entry
    that are not among (or behind) ``made``, as "abbrev subject"."""
    args = ["rev-list", "--oneline", "--all", "--reflog", "--ignore-missing"]
    args += ["--not", *made]
    return git.run(*args, "--").stdout.splitlines()


def _new_remotes(git: Git, recorded: Collection[str]) -> list[str]:
    """The remotes added or changed since ``recorded``, by name."""
    names = {
        line.split(" ", 1)[0].removeprefix("remote.").rsplit(".", 1)[0]
        for line in _remotes(git)
        if line not in recorded
    }
    return sorted(names)


def _unmade(
    path: Path,
    kind: str,
    made: Collection[str],
    files: Any,
    remotes: Collection[str] = (),
) -> list[str]:
    """What ``path`` holds that the toolkit did not make."""
    if kind == "linked":
        return [".git is a file or link: a worktree or submodule of another repository"]
    if kind == "directory":
        return ["it is not a git repository vllm-patchkit made"]
    git = Git(path)
    found = [
        ("commits", _new_commits(git, made)),
        ("remotes", _new_remotes(git, remotes)),
        ("linked worktrees", git.worktrees()[1:]),
    ]
    if kind == "bare":
        stray = sorted(p.name for p in path.iterdir() if p.name not in BARE_LAYOUT)
        hooks = path / "hooks"
        if hooks.is_dir():
            stray += [
                f"hooks/{p.name}"
                for p in sorted(hooks.iterdir())
                if not p.name.endswith(".sample")
            ]
        found.append(("files git does not keep there", stray))
    else:
        changed = git.changed_paths(untracked=False, locks=False)
        found.append(("changed files", changed))
        left = files if isinstance(files, dict) else {}
        other = _other_files(git, path).items()
        unmade = sorted(name for name, seen in other if left.get(name) != seen)
        found.append(("untracked or ignored files", unmade))
    return [_named(label, items) for label, items in found if items]


def check_owned(path: Path, what: str, made: Collection[str] = ()) -> None:
    """Refuse (exit 2) unless ``path`` is a repository the toolkit recorded,
    or one holding nothing but ``made`` (commits the caller makes there the
    same every time), and it holds no work the toolkit did not make."""
    entry = _recorded(path)
    kind = _git_kind(path)
    if entry is None and not made:
        raise NotOwnedError(
            f"{what} {path} is not empty and was not created by vllm-patchkit (it "
            "may be your own checkout); refusing to delete or replace it: choose "
            "another path, or remove it yourself"
        )
    known = entry or {}
    # Only object ids reach git: a record is data, never an option.
    tips = [t for t in [*made, *known.get("tips", [])] if OBJECT_ID.fullmatch(t)]
    try:
        files, remotes = known.get("files", {}), known.get("remotes", ())
        found = _unmade(path, kind, tips, files, remotes)
        if entry is None and not found and not Git(path).out("for-each-ref"):
            found = ["it has no refs: nothing vllm-patchkit built"]
    except (GitError, OSError) as exc:
        found = [f"git cannot read it ({exc})"]
    if found:
        state = (
            "was made by vllm-patchkit but now holds work it did not make"
            if entry
            else "is not empty and was not created by vllm-patchkit"
        )
        raise NotOwnedError(
            f"{what} {path} {state} ({'; '.join(found)}); refusing to delete or "
            "replace it: choose another path, or remove it yourself"
        )


def check_replaceable(path: Path, what: str, made: Collection[str] = ()) -> None:
    """Refuse unless ``path`` is absent, an empty directory, or the
    toolkit's own, unchanged (:func:`check_owned`)."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise NotOwnedError(
            f"{what} {path} exists and is not a directory vllm-patchkit made; "
            "refusing to replace it (choose another path)"
        )
    if not path.exists() or not any(path.iterdir()):
        return
    check_owned(path, what, made)


def remove_owned(path: Path, what: str) -> None:
    """Delete ``path`` if it is ours and unchanged (or empty) so that it can
    be made anew; refuse (exit 2) when it is not."""
    check_replaceable(path, what)
    if path.is_dir():
        shutil.rmtree(path)


def claim_dir(path: Path, what: str) -> None:
    """Make ``path`` the toolkit's directory to build in: created and
    recorded when absent or empty; refused (exit 2) when it holds anything
    and the toolkit has no record of making it."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise NotOwnedError(
            f"{what} {path} exists and is not a directory; choose another path"
        )
    if path.exists() and any(path.iterdir()):
        if _recorded(path) is None:
            raise NotOwnedError(
                f"{what} {path} is not empty and was not created by vllm-patchkit "
                "(it may be your own checkout); refusing to build in it: choose "
                "an empty or new directory"
            )
        return
    path.mkdir(parents=True, exist_ok=True)
    record(path, what)
