"""Reading one file of a tree the user hands us: a regular file, bounded, never a wait.

Any name in a tree may be a FIFO (a read waits for a writer forever), a
device or a link to one (``/dev/zero`` never ends), a socket, or a file too
large to hold. Every reader of a tree's files goes through
:func:`read_regular`: the path is ``stat``-ed (a link is judged by what it
points to) and must be a regular file within a cap; it is then opened with
``O_NONBLOCK``, so that a FIFO swapped in meanwhile cannot block, checked
again on the open file, and read no further than one byte past the cap.
:func:`read_python` decodes what it read as Python does (the encoding
declaration, a BOM): a module Python imports is a module we read.
A file not read raises :class:`NotRead`, saying why, for the caller to name.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class NotRead(OSError):
    """A file that was not read; ``why`` says why, in a user's words."""

    def __init__(self, path: Path | str, why: str, size: int | None = None) -> None:
        super().__init__(f"{path}: {why}")
        self.path = Path(path)
        self.why = why
        self.size = size
        """The file's size when it was past the cap, else None."""


def _kind(mode: int) -> str | None:
    """What a non-regular file is (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _checked(path: Path | str, info: os.stat_result, max_bytes: int) -> None:
    kind = _kind(info.st_mode)
    if kind is not None:
        raise NotRead(path, f"{kind}, not a regular file")
    if info.st_size > max_bytes:
        raise NotRead(
            path, f"{info.st_size} bytes, past the bound of {max_bytes}", info.st_size
        )


def read_regular(path: Path | str, max_bytes: int) -> bytes:
    """The bytes of ``path``, a regular file (or a link to one) of at most
    ``max_bytes``; :class:`NotRead` otherwise (an ``OSError``)."""
    try:
        _checked(path, os.stat(path), max_bytes)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            _checked(path, os.fstat(fd), max_bytes)
            chunks, left = [], max_bytes + 1
            while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
                chunks.append(chunk)
                left -= len(chunk)
        finally:
            os.close(fd)
    except NotRead:
        raise
    except OSError as exc:
        raise NotRead(path, f"cannot be read ({exc.strerror or exc})") from exc
    data = b"".join(chunks)
    if len(data) > max_bytes:  # it grew while read
        raise NotRead(path, f"more than {max_bytes} bytes", len(data))
    return data


def read_python(path: Path | str, max_bytes: int) -> str:
    """The text of the Python module at ``path``, decoded as the interpreter
    decodes it (PEP 263's declaration, a UTF-8 BOM, universal newlines: line
    numbers are the interpreter's); :class:`NotRead` when it is not."""
    from importlib.util import decode_source

    data = read_regular(path, max_bytes)
    try:
        return decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        raise NotRead(path, f"not Python source text ({exc})") from exc
