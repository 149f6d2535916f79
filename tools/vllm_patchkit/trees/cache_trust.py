"""Whether a cache the toolkit runs code from, or takes verdicts from, is used.

The bytecode cache hands a tree child code to execute; the run caches
(the suite's report cache, the code readings, the matrix's cells) hand back
verdicts. Their entries are keyed by content hashes, but a key defends
nothing: whoever can write the directory can write any entry under any key,
with whatever it records inside. The one defence is who can write there,
so every such cache is judged by one rule (:func:`distrust`):

- the directory and each one above it up to the cache root
  (:func:`~vllm_patchkit.paths.cache_dir`; for a directory outside it, the
  directory itself) is owned by this process's effective user and is not
  writable by group or others;
- each directory above that, up to ``/``, is owned by that user or root and
  is not writable by group or others unless sticky (``/tmp``): no one else
  can rename the cache away and put another in its place.

The path is judged resolved, and used resolved from then on, so a symbolic
link retargeted later does not move it. A rejected cache is said once per
process on stderr and the run goes on without it (it compiles, or runs
again); it is never changed or emptied. Entries are read only as files
this user owns and no one else can write (:func:`read_entry`): a
subdirectory an earlier umask left group-writable cannot slip in an entry
of someone else's.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from pathlib import Path

from vllm_patchkit.paths import cache_dir

_WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH

_said: set[str] = set()
"""The directories already rejected on stderr in this process."""


def _owner_rule(path: Path, info: os.stat_result, uid: int) -> str | None:
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a directory"
    if info.st_uid != uid:
        return f"{path} is owned by uid {info.st_uid}, not by this user ({uid})"
    if info.st_mode & _WRITABLE_BY_OTHERS:
        return f"{path} is writable by others (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def _ancestor_rule(path: Path, info: os.stat_result, uid: int) -> str | None:
    if info.st_uid not in (uid, 0):
        return f"{path} is owned by uid {info.st_uid}, neither this user nor root"
    sticky = info.st_mode & stat.S_ISVTX
    if info.st_mode & _WRITABLE_BY_OTHERS and not sticky:
        return f"{path} is writable by others (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def distrust(directory: Path, root: Path | None = None) -> str | None:
    """Why the existing ``directory`` may not be used as a cache, or None.

    ``root``: the cache root it lies under (default: the toolkit's cache
    directory); the ownership rule covers ``directory`` up to it, the
    ancestor rule the rest (see the module's docstring).
    """
    uid = os.geteuid()
    try:
        resolved = directory.resolve(strict=True)
        top = (root or cache_dir()).resolve()
        owned_up_to = top if resolved.is_relative_to(top) else resolved
        for path in (resolved, *resolved.parents):
            info = os.lstat(path)
            rule = _owner_rule if path.is_relative_to(owned_up_to) else _ancestor_rule
            reason = rule(path, info, uid)
            if reason is not None:
                return reason
    except (OSError, RuntimeError) as exc:
        return f"{directory} cannot be examined ({exc})"
    return None


def _make(directory: Path) -> None:
    """Create ``directory`` and the directories missing above it, each
    private (0700) whatever the umask leaves: a cache made writable by a
    group (umask 002) would be rejected by the rule it was made for."""
    missing = []
    path = directory.absolute()
    while not os.path.lexists(path):
        missing.append(path)
        path = path.parent
    for path in reversed(missing):
        # Made meanwhile by another run: judged like any other.
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)


def trusted_dir(directory: Path, what: str, root: Path | None = None) -> Path | None:
    """``directory`` resolved, made private if absent, when the rule allows
    it as a cache; otherwise None, said once on stderr."""
    try:
        _make(directory)
    except OSError as exc:
        reason: str | None = f"{directory} cannot be created ({exc.strerror})"
    else:
        reason = distrust(directory, root)
    if reason is None:
        return directory.resolve()
    _say_once(directory, what, reason)
    return None


def _say_once(directory: Path, what: str, reason: str) -> None:
    key = str(directory)
    if key in _said:
        return
    _said.add(key)
    stream = sys.stderr
    if stream is None:  # stderr closed: the run goes on, unsaid
        return
    # A broken or closed stream must not stop the run.
    with contextlib.suppress(OSError, ValueError):
        print(
            f"vllm-patchkit: not using the {what} {directory}: {reason}; going on "
            "without it (a cache must be your own and not writable by others: "
            "chown it, chmod go-w)",
            file=stream,
            flush=True,
        )


def read_entry(path: Path, max_bytes: int) -> tuple[bytes, os.stat_result] | None:
    """The bytes of the cache entry ``path`` and its status, or None when it
    is absent, not a regular file (a FIFO, device, socket, directory or
    symbolic link), not this user's own or writable by others, larger than
    ``max_bytes`` or unreadable.

    Opened without blocking (a FIFO would wait for a writer) and without
    following a link; the type and size are taken from the open file, and
    the read stops one byte past the cap.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
            return None
        if info.st_uid != os.geteuid() or info.st_mode & _WRITABLE_BY_OTHERS:
            return None
        with os.fdopen(fd, "rb", closefd=False) as stream:
            data = stream.read(max_bytes + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return (data, info) if len(data) <= max_bytes else None
