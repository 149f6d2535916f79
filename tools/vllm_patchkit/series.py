"""The patch series: ``patches/series`` plus ``git format-patch`` files.

``series`` lists patch files in application order, one a line, like quilt's;
``#`` starts a comment. Each patch carries its metadata as trailers in its
commit message, so a rebase or refresh keeps it with the change:

* DEP-3 provenance: ``Origin``, ``Bug``, ``Forwarded``, ``Applied-Upstream``;
* ``Affects``: the vLLM releases that need the patch (``0.11.1..0.28.0``);
* ``Invariant``: the name of the check that says what the patched code must
  look like (see :mod:`vllm_patchkit.invariants`);
* ``Signed-off-by``: the DCO sign-off vLLM requires.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from email.header import decode_header, make_header
from pathlib import Path, PurePosixPath

from vllm_patchkit.paths import PATCHES_DIR

REQUIRED_TRAILERS = ("Origin", "Forwarded", "Signed-off-by")
_TRAILER = re.compile(r"^([A-Za-z][A-Za-z0-9-]*): (.+)$")
_DIFF_GIT = re.compile(r"^diff --git a/(.+) b/(.+)$")


class SeriesError(ValueError):
    """The series file or one of its patches is malformed or unsafe."""


@dataclass(frozen=True)
class Patch:
    """One ``git format-patch`` file and what its header says."""

    path: Path
    author: str
    date: str
    subject: str
    body: str
    trailers: tuple[tuple[str, str], ...]
    files: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.path.name

    def trailer(self, key: str) -> str | None:
        """The first value of a trailer, matched case-insensitively."""
        values = self.trailer_values(key)
        return values[0] if values else None

    def trailer_values(self, key: str) -> list[str]:
        return [v for k, v in self.trailers if k.lower() == key.lower()]

    @property
    def invariant(self) -> str | None:
        return self.trailer("Invariant")


@dataclass(frozen=True)
class Series:
    directory: Path
    patches: tuple[Patch, ...] = field(default_factory=tuple)

    @property
    def series_file(self) -> Path:
        return self.directory / "series"


def load_series(directory: Path = PATCHES_DIR) -> Series:
    """Read ``series`` and parse every patch it names; raise SeriesError."""
    series_file = directory / "series"
    if not series_file.is_file():
        raise SeriesError(f"{series_file}: no series file")
    names: list[str] = []
    for lineno, raw in enumerate(series_file.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if len(line.split()) != 1:
            raise SeriesError(
                f"{series_file}:{lineno}: expected one patch file name, got {raw!r}"
                " (patch options such as -p are not supported)"
            )
        if "/" in line or line.startswith(".") or not line.endswith(".patch"):
            raise SeriesError(
                f"{series_file}:{lineno}: {line!r} must be a *.patch file name"
                " inside the patches directory"
            )
        if line in names:
            raise SeriesError(f"{series_file}:{lineno}: {line!r} is listed twice")
        names.append(line)
    if not names:
        raise SeriesError(f"{series_file}: lists no patches")
    return Series(directory, tuple(parse_patch(directory / n) for n in names))


def parse_patch(path: Path) -> Patch:
    """Parse a ``git format-patch`` file; raise SeriesError when malformed."""
    if not path.is_file():
        raise SeriesError(f"{path}: listed in series but missing")
    lines = path.read_text().splitlines()
    if not lines or not lines[0].startswith("From "):
        raise SeriesError(f"{path}: not a git format-patch file (no 'From ' line)")
    headers, index = _read_headers(path, lines)
    body_lines: list[str] = []
    while index < len(lines) and lines[index] != "---":
        body_lines.append(lines[index])
        index += 1
    if index == len(lines):
        raise SeriesError(f"{path}: no '---' line between message and diff")
    files = _touched_files(path, lines[index:])
    body = "\n".join(body_lines).strip("\n")
    subject = re.sub(r"^\[PATCH[^\]]*\]\s*", "", headers.get("subject", ""))
    if not subject:
        raise SeriesError(f"{path}: no Subject")
    return Patch(
        path=path,
        author=headers.get("from", ""),
        date=headers.get("date", ""),
        subject=subject,
        body=body,
        trailers=_trailers(body),
        files=files,
    )


def _read_headers(path: Path, lines: list[str]) -> tuple[dict[str, str], int]:
    headers: dict[str, str] = {}
    key = None
    index = 1
    while index < len(lines) and lines[index] != "":
        line = lines[index]
        if line[:1] in (" ", "\t") and key:
            headers[key] += " " + line.strip()
        elif ":" in line:
            key, value = line.split(":", 1)
            key = key.strip().lower()
            headers[key] = value.strip()
        else:
            raise SeriesError(f"{path}:{index + 1}: malformed header {line!r}")
        index += 1
    decoded = {k: str(make_header(decode_header(v))) for k, v in headers.items()}
    return decoded, index + 1


def _trailers(body: str) -> tuple[tuple[str, str], ...]:
    """``Key: value`` lines of the message's last paragraph."""
    paragraphs = [p for p in body.split("\n\n") if p.strip()]
    if not paragraphs:
        return ()
    found = []
    for line in paragraphs[-1].splitlines():
        match = _TRAILER.match(line.strip())
        if match is None:
            return ()
        found.append((match.group(1), match.group(2).strip()))
    return tuple(found)


def _touched_files(path: Path, diff_lines: list[str]) -> tuple[str, ...]:
    files: list[str] = []
    for line in diff_lines:
        match = _DIFF_GIT.match(line)
        if match is None:
            continue
        for name in match.groups():
            check_repo_relative(path, name)
            if name not in files:
                files.append(name)
    if not files:
        raise SeriesError(f"{path}: contains no 'diff --git' sections")
    return tuple(files)


def check_repo_relative(path: Path, name: str) -> None:
    """Refuse a patched path that leaves the repository or enters ``.git``."""
    parts = PurePosixPath(name).parts
    if name.startswith("/") or ".." in parts or not parts:
        raise SeriesError(f"{path}: patched path {name!r} escapes the repository")
    if parts[0] == ".git" or ".git" in parts:
        raise SeriesError(f"{path}: patched path {name!r} touches .git")


def missing_trailers(patch: Patch) -> list[str]:
    return [key for key in REQUIRED_TRAILERS if patch.trailer(key) is None]
