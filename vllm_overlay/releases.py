"""A vLLM release number, read one way by the overlay and the toolkit.

A release is ``X.Y.Z`` or ``X.Y.Z.W`` (``0.10.1.1``), with or without a
local part (``0.28.0+rocm700``), on :mod:`packaging.version` so that
ordering is PEP 440's; the syntax taken is narrower (vLLM's). vLLM depends
on ``packaging``, so it is there wherever the overlay has a vLLM to judge.
The toolkit's :mod:`vllm_patchkit.trees.versions` reads trees, tags and
ranges on top of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

_PARTS = (3, 4)
"""A vLLM release has three numbers, or four (``0.10.1.1``)."""

Release = Version
"""A final release (``0.28.0``, ``0.10.1.1``): no epoch, pre-, post-,
development or local part. packaging orders them (``0.10.1 < 0.10.1.1 <
0.10.2``) and prints them back as they are written."""


def _pep440(text: str) -> Version | None:
    """``text`` as PEP 440 reads it, only if written the way vLLM writes its
    versions (PEP 440 also takes ``v1.0``, ``01.0``, ``1.0-2``; their
    normal forms differ from the text, so they are refused here)."""
    try:
        version = Version(text)
    except InvalidVersion:
        return None
    if version.public != text.partition("+")[0] or version.epoch != 0:
        return None
    final = version.pre is None and version.post is None  # post0 is one too
    if len(version.release) not in _PARTS or not final:
        return None
    return version


def parse_release(text: str) -> Release | None:
    """The release ``0.28.0`` (or ``0.28.0+rocm700``; the local part is
    dropped) or ``0.10.1.1`` names; None for anything else: a tag
    (``v0.28.0``), a pre-release, a development version (see
    :func:`version_release`), ``git describe`` output, two numbers, text
    with anything around it."""
    version = _pep440(text)
    if version is None or version.dev is not None:
        return None
    return Version(version.public)


def version_release(text: str) -> Release | None:
    """The release a version string is: a release is itself; a
    setuptools-scm development version (``0.17.1.dev2+gabc1234``, guessed
    one past its tag) is its tag's release (0.17.0); anything else None."""
    release = parse_release(text)
    if release is not None:
        return release
    version = _pep440(text)
    if version is None or version.dev is None or version.release[-1] == 0:
        return None
    *head, last = version.release
    return Version(".".join(map(str, (*head, last - 1))))


@dataclass(frozen=True)
class ReleaseRange:
    """``first..last`` inclusive; ``last`` None: every release from ``first``
    (a bug no release fixes yet)."""

    first: Release
    last: Release | None

    def __contains__(self, release: Release) -> bool:
        return self.first <= release and (self.last is None or release <= self.last)

    def __str__(self) -> str:
        return f"{self.first}..{self.last or ''}"


def release_range(text: str) -> ReleaseRange | None:
    """``A..B`` or ``A..`` of releases with ``A <= B``, the one way a range
    is written (a patch's ``Affects:``, a fix record's ``affected``); None
    for anything else."""
    first_text, dots, last_text = (part.strip() for part in text.partition(".."))
    first = parse_release(first_text)
    last = parse_release(last_text) if last_text else None
    if not dots or first is None or (last is None and last_text):
        return None
    if last is not None and last < first:
        return None
    return ReleaseRange(first, last)
