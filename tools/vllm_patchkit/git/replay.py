"""The contents a series makes, patch after patch, for ``check``'s trial tree.

Asking git for each step costs two processes a patch (``git apply
--cached``, then ``checkout-index``). Once one ``git apply --cached`` of
the whole series has shown that it applies cleanly in order, the steps are
replayed here instead: each hunk put where git puts it (the line it
states, moved by the file's earlier hunks, else the nearest exact match).
The replay counts only if it ends on git's own result for every file; else
(or for a rename, a mode change, a binary patch, a symbolic link, a file
the work tree changed) it gives None and the caller asks git for each step.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from vllm_overlay.tree_files import read_regular
from vllm_patchkit.git.code_readings import blob_id
from vllm_patchkit.git.series import Patch

Contents = dict[str, bytes | None]
"""Files by path: their content, None where absent."""
MAX_FILE_BYTES = 16 << 20
"""A work-tree file past this is not read here (git takes the steps)."""

_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_UNREAD = (
    b"old mode",
    b"new mode",
    b"similarity index",
    b"dissimilarity index",
    b"rename ",
    b"copy ",
    b"Binary files",
    b"GIT binary patch",
    b"new file mode 120000",
    b"new file mode 160000",
)


class Hunk(NamedTuple):
    start: int
    """The first line it keeps or removes, 0-based (where a hunk that
    keeps and removes nothing inserts)."""
    lines: tuple[bytes, ...]
    """Its body: ``' '``, ``'-'`` and ``'+'`` lines and ``\\`` markers."""


class FileChange(NamedTuple):
    path: str
    created: bool
    deleted: bool
    hunks: tuple[Hunk, ...]


def file_changes(mail: bytes) -> list[FileChange] | None:
    """Each file the mail's diff changes, or None when one is more than a
    text change of a regular file."""
    lines = mail.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith(b"diff --git ")]
    changes = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        change = _file_change(lines[start:end])
        if change is None:
            return None
        changes.append(change)
    return changes


def _file_change(section: list[bytes]) -> FileChange | None:
    names = section[0].decode(errors="replace").rstrip("\n").split(" ")
    if len(names) != 4 or names[2][2:] != names[3][2:]:
        return None  # a rename, or a name with spaces: git's to read
    index = next((i for i, line in enumerate(section) if line.startswith(b"@@")), None)
    header = section[1:index]
    if index is None or any(line.startswith(_UNREAD) for line in header):
        return None
    hunks = _hunks(section[index:])
    if hunks is None:
        return None
    created = any(line.startswith(b"new file mode") for line in header)
    deleted = any(line.startswith(b"deleted file mode") for line in header)
    return FileChange(names[3][2:], created, deleted, hunks)


def _hunks(lines: list[bytes]) -> tuple[Hunk, ...] | None:
    """The hunks, read by the counts their headers give (the mail's
    signature after the last one is not a hunk's line)."""
    hunks = []
    at = 0
    while at < len(lines) and lines[at].startswith(b"@@"):
        header = _HUNK.match(lines[at])
        if header is None:
            return None
        old_count = int(header.group(2) or 1)
        new_count = int(header.group(4) or 1)
        body: list[bytes] = []
        old = new = 0
        at += 1
        while (old < old_count or new < new_count) and at < len(lines):
            line = lines[at]
            kind = line[:1]
            if kind == b" ":
                old, new = old + 1, new + 1
            elif kind == b"-":
                old += 1
            elif kind == b"+":
                new += 1
            elif kind != b"\\":
                return None
            body.append(line)
            at += 1
        if (old, new) != (old_count, new_count):
            return None
        while at < len(lines) and lines[at].startswith(b"\\"):
            body.append(lines[at])
            at += 1
        first = int(header.group(1))
        hunks.append(Hunk(first - 1 if old_count else first, tuple(body)))
    return tuple(hunks)


def _sides(hunk: Hunk) -> tuple[list[bytes], list[bytes]]:
    """The lines the hunk needs and the lines it leaves (``\\ No newline at
    end of file`` takes the newline off the line before it)."""
    before: list[bytes] = []
    after: list[bytes] = []
    lines = hunk.lines
    for line, following in zip(lines, (*lines[1:], b""), strict=True):
        kind, text = line[:1], line[1:]
        if kind == b"\\":
            continue
        if following.startswith(b"\\"):
            text = text.removesuffix(b"\n")
        if kind in (b" ", b"-"):
            before.append(text)
        if kind in (b" ", b"+"):
            after.append(text)
    return before, after


def _places(start: int, low: int, high: int) -> Iterator[int]:
    """``start``, then each place nearer first, earlier before later."""
    if low <= start <= high:
        yield start
    for distance in range(1, max(start - low, high - start) + 1):
        for place in (start - distance, start + distance):
            if low <= place <= high:
                yield place


def apply_hunks(data: bytes, hunks: tuple[Hunk, ...]) -> bytes | None:
    """``data`` with the hunks applied in order where they match exactly;
    None when one matches nowhere after the hunk before it."""
    image = data.splitlines(keepends=True)
    result: list[bytes] = []
    at = 0
    moved = 0
    for hunk in hunks:
        before, after = _sides(hunk)
        high = len(image) - len(before)
        found = next(
            (
                place
                for place in _places(hunk.start + moved, at, high)
                if image[place : place + len(before)] == before
            ),
            None,
        )
        if found is None:
            return None
        moved = found - hunk.start
        result += image[at:found] + after
        at = found + len(before)
    return b"".join(result + image[at:])


def replay(
    patches: list[Patch], head: Mapping[str, str], root: Path
) -> list[Contents] | None:
    """Each patch's files after it, in the series' order, or None.

    ``head``: HEAD's blob id of each file the patches touch (absent where
    HEAD has none); ``root``: the work tree, whose file is read as HEAD's
    content where its blob id is HEAD's."""
    current: Contents = {}
    steps = []
    for patch in patches:
        changes = file_changes(patch.path.read_bytes())
        if changes is None or {c.path for c in changes} != set(patch.files):
            return None
        step: Contents = {}
        for change in changes:
            if change.path not in current:
                try:
                    current[change.path] = _head_content(change.path, head, root)
                except LookupError:
                    return None  # the work tree changed it: git reads HEAD's
            held = current[change.path]
            if (held is None) != change.created:
                return None
            after = apply_hunks(held or b"", change.hunks)
            if after is None or (change.deleted and after):
                return None
            step[change.path] = current[change.path] = None if change.deleted else after
        steps.append(step)
    return steps


def _head_content(path: str, head: Mapping[str, str], root: Path) -> bytes | None:
    """HEAD's content of ``path`` read from the work tree (None: HEAD has no
    such file); raises LookupError where the work tree's differs."""
    if path not in head:
        return None
    file = root / path
    try:
        # A link, a FIFO or a device is not HEAD's file: git reads that.
        data = None if file.is_symlink() else read_regular(file, MAX_FILE_BYTES)
    except OSError:
        data = None
    if data is None or blob_id(data) != head[path]:
        raise LookupError(path)
    return data
