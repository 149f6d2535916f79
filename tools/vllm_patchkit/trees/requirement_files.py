"""A vLLM tree's requirement files, read as untrusted input.

A tree (a user's checkout, a downloaded release) says which packages its
runtime needs; the toolkit then installs the missing ones. So the files are
read the way a hostile tree could write them: an ``-r`` include must stay
inside the tree (no ``../`` or symlink to a token file or
``/proc/self/environ``), includes nest at most :data:`MAX_DEPTH` deep and
never in a cycle, and a file that cannot be read so makes the tree
un-judgeable (:class:`UnreadableRequirements`, exit 3), never a traceback.
Only plain requirement names are kept for installing: a path, a URL, a wheel
or archive file name (which pip would install from the current directory)
is reported as not provided. Every problem names the file and line number,
never the line's content.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

# packaging is a declared dependency; pip's vendored copy is never used:
# importing pip in-process breaks a later ``import setuptools`` (pip_config.py).
from packaging.markers import (
    InvalidMarker,
    UndefinedComparison,
    UndefinedEnvironmentName,
)
from packaging.requirements import InvalidRequirement, Requirement

from vllm_overlay.tree_files import NotRead, read_regular
from vllm_patchkit.errors import PatchkitError
from vllm_patchkit.judgement import Verdict

_MARKER_ERRORS = (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName)

REQUIREMENT_FILES = ("requirements/cpu.txt", "requirements/common.txt")
"""Read in this order; cpu.txt includes common.txt (``-r``) where it exists."""

MAX_DEPTH = 16
"""Files deep an ``-r`` chain may go (vLLM's own go two deep)."""
MAX_BYTES = 1 << 20
"""Largest requirement file read (vLLM's are a few KiB)."""

_COMMENT = re.compile(r"(^|\s+)#.*$")
_INCLUDE = re.compile(r"^(-r\s*|--requirement(\s+|=))")
# File names pip installs from the current directory instead of the index.
_ARCHIVE = (".whl", ".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz")
_ARCHIVE += (".tar.xz", ".txz", ".tlz", ".tar.lz", ".tar.lzma")


class UnreadableRequirements(PatchkitError):
    """The tree's requirement files cannot be read safely: its runtime, and
    so any verdict on it, cannot be given (exit 3, cannot judge)."""

    code = Verdict.CANNOT_JUDGE.exit_code
    status = Verdict.CANNOT_JUDGE


def tree_requirements(tree: Path) -> tuple[list[Requirement], list[str]]:
    """The plain requirements of ``tree`` that apply here (markers
    evaluated), and ``file:line: why`` for each line not kept."""
    reader = _Reader(tree.resolve())
    for name in REQUIREMENT_FILES:
        reader.read(reader.tree / name, name, ())
    if not reader.seen:
        for dist_info in sorted(reader.tree.glob("vllm-*.dist-info")):
            reader.read_metadata(dist_info / "METADATA")
    return reader.requirements, reader.problems


def metadata_requirements(path: Path) -> list[Requirement]:
    """The applying ``Requires-Dist`` of an installed distribution's METADATA."""
    found: list[Requirement] = []
    if path.is_file():
        for _, text in _requires_dist(path.read_text(errors="replace")):
            req = _parse(text)
            try:
                if req is not None and _applies(req):
                    found.append(req)
            except _MARKER_ERRORS:
                continue
    return found


class _Reader:
    def __init__(self, tree: Path) -> None:
        self.tree = tree
        self.seen: set[Path] = set()
        self.requirements: list[Requirement] = []
        self.problems: list[str] = []

    def read(self, path: Path, where: str, chain: tuple[Path, ...]) -> None:
        """Read ``path`` (named by ``where``: a file or ``file:line``)."""
        resolved = self._inside(path, where)
        if resolved in chain:
            raise self._cannot(where, "-r includes a file that includes it (a cycle)")
        if len(chain) >= MAX_DEPTH:
            raise self._cannot(
                where, f"-r includes nest more than {MAX_DEPTH} files deep"
            )
        if resolved in self.seen:
            return
        if not resolved.is_file():
            if chain:  # an include of a file the tree lacks
                self.problems.append(f"{where}: -r names no file in the tree")
            return
        self.seen.add(resolved)
        name = resolved.relative_to(self.tree).as_posix()
        for number, line in _logical_lines(self._text(resolved, name)):
            here = f"{name}:{number}"
            include = _INCLUDE.match(line)
            if include:
                target = line[include.end() :].strip()
                self.read(resolved.parent / target, here, (*chain, resolved))
            elif line.startswith("-"):
                continue  # pip options (index URLs, constraints): never followed
            else:
                self._add(line, here)

    def read_metadata(self, path: Path) -> None:
        resolved = self._inside(path, path.relative_to(self.tree).as_posix())
        if not resolved.is_file():
            return
        name = resolved.relative_to(self.tree).as_posix()
        for number, text in _requires_dist(self._text(resolved, name)):
            self._add(text, f"{name}:{number}")

    def _inside(self, path: Path, where: str) -> Path:
        """``path`` resolved, which must stay inside the tree."""
        try:
            try:
                resolved = path.resolve(strict=True)
            except FileNotFoundError:  # absent: where it would be is still checked
                resolved = path.resolve()
        except (OSError, RuntimeError) as exc:  # a symlink loop, among others
            why = f"cannot be resolved ({type(exc).__name__}: a symlink loop?)"
            raise self._cannot(where, why) from None
        if not resolved.is_relative_to(self.tree):
            raise self._cannot(where, "leads outside the tree; not read")
        return resolved

    def _text(self, path: Path, name: str) -> str:
        try:
            return read_regular(path, MAX_BYTES).decode()
        except NotRead as exc:
            raise self._cannot(name, exc.why) from None
        except UnicodeDecodeError as exc:
            raise self._cannot(name, f"cannot be read ({type(exc).__name__})") from None

    def _cannot(self, where: str, why: str) -> UnreadableRequirements:
        return UnreadableRequirements(
            f"{where}: {why} (in {self.tree}): the tree's runtime cannot be "
            "given, so it cannot be judged"
        )

    def _add(self, text: str, where: str) -> None:
        req = _parse(text)
        if req is None:
            self.problems.append(f"{where}: not a requirement; not installed")
            return
        try:
            if not _applies(req):
                return
        except _MARKER_ERRORS:
            self.problems.append(f"{where}: its marker cannot be evaluated here")
            return
        if not is_plain(req):
            self.problems.append(
                f"{where}: not a plain requirement name (a URL or a file); "
                "not installed"
            )
            return
        self.requirements.append(req)


def is_plain(req: Requirement) -> bool:
    """A name the index answers for: no URL, not a file name pip would
    install from the current directory."""
    return not req.url and not req.name.lower().endswith(_ARCHIVE)


def _parse(text: str) -> Requirement | None:
    try:
        return Requirement(text)
    except InvalidRequirement:
        return None


def _applies(req: Requirement) -> bool:
    """Whether the marker holds here (it is then dropped); raises when the
    marker cannot be evaluated."""
    applies = req.marker is None or req.marker.evaluate({"extra": ""})
    req.marker = None
    return bool(applies)


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """``(first line number, text)`` of each non-empty logical line."""
    start, parts = 0, []
    # A last empty line ends a continuation the text ends in.
    for number, raw in enumerate([*text.splitlines(), ""], 1):
        if not parts:
            start = number
        if raw.endswith("\\"):
            parts.append(raw[:-1])
            continue
        line = _COMMENT.sub("", "".join([*parts, raw])).strip()
        parts = []
        if line:
            yield start, line


def _requires_dist(text: str) -> Iterable[tuple[int, str]]:
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("Requires-Dist:"):
            yield number, line.split(":", 1)[1].strip()
