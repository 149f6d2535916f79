"""Directories the toolkit made, and the rule that it replaces only those.

A directory the toolkit creates for the user at a path they chose (the
demo's release clone, an upstream built at ``--dest``) carries a marker
file. A non-empty directory without it may be the user's own checkout, with
work nowhere else, so it is never deleted or replaced: the command refuses
before changing anything (exit 2). The marker sits where git never shows
it: in ``.git/`` of a work tree, at the top of anything else (a bare
repository's own directory).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from vllm_patchkit.errors import InputError

MARKER = "vllm-patchkit-owned"


class NotOwnedError(InputError):
    """A path the toolkit did not create holds something; nothing was changed."""


def _marker(path: Path) -> Path:
    git_dir = path / ".git"
    if git_dir.is_dir() and not git_dir.is_symlink():
        return git_dir / MARKER
    return path / MARKER


def mark(path: Path) -> None:
    """Record that the toolkit created ``path`` (an existing directory)."""
    _marker(path).write_text(
        "Created by vllm-patchkit, which may delete or replace this directory.\n"
    )


def is_owned(path: Path) -> bool:
    marker = _marker(path)
    return marker.is_file() and not marker.is_symlink()


def check_replaceable(path: Path, what: str) -> None:
    """Refuse unless ``path`` is absent, an empty directory, or marked ours."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise NotOwnedError(
            f"{what} {path} exists and is not a directory vllm-patchkit made; "
            "refusing to replace it (choose another path)"
        )
    if not path.exists() or not any(path.iterdir()) or is_owned(path):
        return
    raise NotOwnedError(
        f"{what} {path} is not empty and was not created by vllm-patchkit (it "
        "may be your own checkout); refusing to delete or replace it: choose "
        "another path, or remove it yourself"
    )


def remove_owned(path: Path, what: str) -> None:
    """Delete ``path`` if it is ours (or empty) so that it can be made anew;
    refuse (exit 2) when it is not."""
    check_replaceable(path, what)
    if path.is_dir():
        shutil.rmtree(path)
