"""The patch series: ``patches/series`` plus ``git format-patch`` files.

``series`` lists patch files in application order, one a line, like quilt's;
``#`` starts a comment. Each patch file holds one mail (one commit), and
carries its metadata as trailers in its commit message, so a rebase or
refresh keeps it with the change:

* DEP-3 provenance: ``Origin``, ``Bug``, ``Forwarded``, ``Applied-Upstream``;
* ``Affects``: the vLLM releases the series carries the patch for
  (``0.11.1..0.28.0``, or ``0.11.1..`` for every release from 0.11.1); on a
  tree of a release outside it the patch is *not carried* (skipped, never
  dropped from the series); a patch without it is carried everywhere;
* ``Invariant``: the name of the check that says what the patched code must
  look like (see :mod:`vllm_patchkit.git.invariants`);
* ``Signed-off-by``: the DCO sign-off vLLM requires.

:func:`load_series` is the one reader of ``series`` for every command; what
it refuses (names leaving the directory, unknown invariants, two mails in
one file) never reaches git or the file system.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from vllm_overlay.fixes.base import Fix
from vllm_overlay.releases import Release, ReleaseRange, parse_release
from vllm_patchkit.errors import InputError
from vllm_patchkit.git.invariants import INVARIANTS, fix_of_invariant
from vllm_patchkit.paths import PATCHES_DIR
from vllm_patchkit.trees.versions import parse_range

_TRAILER = re.compile(r"^([A-Za-z][A-Za-z0-9-]*): (.+)$")
_DIFF_GIT = re.compile(r"^diff --git a/(.+) b/(.+)$")
# The first line of every mail git format-patch writes.
_MAIL_START = re.compile(r"^From [0-9a-f]{40} Mon Sep 17 00:00:00 2001$")


class SeriesError(InputError):
    """The series file or one of its patches is malformed or unsafe."""


@dataclass(frozen=True)
class Patch:
    """One ``git format-patch`` file and what its header says."""

    path: Path
    subject: str
    trailers: tuple[tuple[str, str], ...]
    files: tuple[str, ...]
    affects: ReleaseRange | None = None
    """The ``Affects:`` trailer, validated; None: carried for every release."""

    @property
    def name(self) -> str:
        return self.path.name

    def carried_for(self, release: Release | None) -> bool:
        """Whether the series carries this patch for ``release``.

        An unknown release (None: a development tree, upstream main) is
        always carried: the patch is tried there, never skipped.
        """
        return release is None or self.affects is None or release in self.affects

    def trailer(self, key: str) -> str | None:
        """The first value of a trailer, matched case-insensitively."""
        values = self.trailer_values(key)
        return values[0] if values else None

    def trailer_values(self, key: str) -> list[str]:
        return [v for k, v in self.trailers if k.lower() == key.lower()]

    @property
    def invariant(self) -> str | None:
        return self.trailer("Invariant")

    @property
    def applied_upstream(self) -> Release | None:
        """The release of ``Applied-Upstream: 0.29.0, <PR>``: the first
        release whose upstream code carries the change; None when none does
        (or the trailer names no release)."""
        text = self.trailer("Applied-Upstream") or ""
        return parse_release(text.split(",")[0].strip())


@dataclass(frozen=True)
class Series:
    directory: Path
    patches: tuple[Patch, ...] = field(default_factory=tuple)

    @property
    def series_file(self) -> Path:
        return self.directory / "series"

    def of_fix(self, fix: Fix) -> tuple[Patch, ...]:
        """``fix``'s patches, in the series' order (the fix first): those
        whose ``Invariant:`` names one of its rules."""
        owners = ((p, fix_of_invariant(p.invariant)) for p in self.patches)
        return tuple(p for p, owner in owners if owner and owner.name == fix.name)

    def narrowed_to(self, fix: Fix) -> Series:
        """The series of ``fix``'s patches alone."""
        return Series(self.directory, self.of_fix(fix))

    def files(self) -> list[str]:
        """The files the patches change, each once, in series order."""
        return list(dict.fromkeys(f for patch in self.patches for f in patch.files))

    def fix_of(self, patch_name: str) -> Fix | None:
        """The fix the series' patch ``patch_name`` belongs to (None: no
        such patch, or a patch of no fix)."""
        patch = next((p for p in self.patches if p.name == patch_name), None)
        return fix_of_invariant(patch.invariant) if patch else None

    def names(self, wanted: list[str]) -> frozenset[str]:
        """The file names of the patches ``wanted`` names: each a file name
        or a prefix of exactly one (``0003``); SeriesError otherwise."""
        found = set()
        for text in wanted:
            matches = [p.name for p in self.patches if p.name.startswith(text)]
            exact = [name for name in matches if name == text]
            if len(exact or matches) != 1:
                listed = ", ".join(p.name for p in self.patches)
                how = "matches several" if matches else "names no patch"
                raise SeriesError(f"{text!r} {how} of the series ({listed})")
            found.add((exact or matches)[0])
        return frozenset(found)


def load_series(directory: Path = PATCHES_DIR) -> Series:
    """Read ``series`` and parse every patch it names; raise SeriesError."""
    series_file = directory / "series"
    names = [name for _, name in series_entries(series_file) if name is not None]
    if not names:
        raise SeriesError(f"{series_file}: lists no patches")
    patches = tuple(parse_patch(directory / n) for n in names)
    for patch in patches:
        check_invariant_trailer(patch)
    return Series(directory, patches)


def series_entries(series_file: Path) -> list[tuple[str, str | None]]:
    """Each line of ``series_file`` and the patch it names (None: comment, blank).

    A name is one ``*.patch`` file in the series directory, listed once.
    """
    if not series_file.is_file():
        raise SeriesError(f"{series_file}: no series file")
    entries: list[tuple[str, str | None]] = []
    names: list[str] = []
    for lineno, raw in enumerate(series_file.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            entries.append((raw, None))
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
        entries.append((raw, line))
    return entries


def inside(directory: Path, name: str) -> Path:
    """``directory / name``, refused unless it resolves to a file directly in
    ``directory`` (no ``..``, no absolute name, no symlink leading out)."""
    root = directory.resolve()
    target = (directory / name).resolve()
    if target.parent != root or "/" in name or name in ("", ".", ".."):
        raise SeriesError(f"{directory / name}: outside the patches directory {root}")
    return target


def as_commit(path: Path, commit_id: str) -> str:
    """The patch file's mail under the made-up ``commit_id``: read with
    commits, ``git patch-id`` names the patch by that id."""
    _, _, rest = path.read_text().partition("\n")
    return f"From {commit_id} Mon Sep 17 00:00:00 2001\n{rest}"


def check_invariant_trailer(patch: Patch) -> None:
    """At most one ``Invariant:`` trailer, naming a known check."""
    values = patch.trailer_values("Invariant")
    if len(values) > 1:
        raise SeriesError(
            f"{patch.path}: {len(values)} Invariant trailers; a patch names one"
        )
    if values and values[0] not in INVARIANTS:
        known = ", ".join(sorted(INVARIANTS))
        raise SeriesError(
            f"{patch.path}: unknown invariant 'Invariant: {values[0]}' (known: {known})"
        )


def parse_patch(path: Path) -> Patch:
    """Parse a ``git format-patch`` file; raise SeriesError when malformed."""
    if not path.is_file():
        raise SeriesError(f"{path}: listed in series but missing")
    lines = path.read_text().splitlines()
    if not lines or not lines[0].startswith("From "):
        raise SeriesError(f"{path}: not a git format-patch file (no 'From ' line)")
    mails = sum(bool(_MAIL_START.match(line)) for line in lines)
    if mails > 1:
        # git am would make one commit per mail, so the series would carry
        # commits it does not list; a series file names one commit a line.
        raise SeriesError(
            f"{path}: holds {mails} mails (one 'From <commit> Mon Sep 17 00:00:00 "
            "2001' line each); a series patch file holds exactly one: split it "
            "(git format-patch writes one file per commit) and list each in series"
        )
    headers, index = _read_headers(path, lines)
    body_lines: list[str] = []
    while index < len(lines) and lines[index] != "---":
        body_lines.append(lines[index])
        index += 1
    if index == len(lines):
        raise SeriesError(f"{path}: no '---' line between message and diff")
    files = _touched_files(path, lines[index:])
    subject = re.sub(r"^\[PATCH[^\]]*\]\s*", "", headers.get("subject", ""))
    if not subject:
        raise SeriesError(f"{path}: no Subject")
    trailers = _trailers("\n".join(body_lines).strip("\n"))
    return Patch(
        path=path,
        subject=subject,
        trailers=trailers,
        files=files,
        affects=_affects(path, trailers),
    )


def _affects(path: Path, trailers: tuple[tuple[str, str], ...]) -> ReleaseRange | None:
    """The one ``Affects:`` range of a patch; SeriesError when malformed."""
    values = [v for k, v in trailers if k.lower() == "affects"]
    if not values:
        return None
    if len(values) > 1:
        raise SeriesError(f"{path}: {len(values)} Affects trailers; a patch has one")
    try:
        return parse_range(values[0])
    except ValueError as exc:
        raise SeriesError(f"{path}: malformed 'Affects: {values[0]}': {exc}") from exc


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
    decoded = {k: _decode_words(v) for k, v in headers.items()}
    return decoded, index + 1


def _decode_words(value: str) -> str:
    """A header's RFC 2047 encoded words (``=?UTF-8?q?...?=``, which
    format-patch writes for a non-ASCII subject) decoded. The email package
    loads only for such a header: it costs every start-up of the CLI."""
    if "=?" not in value:
        return value
    from email.header import decode_header, make_header

    return str(make_header(decode_header(value)))


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
