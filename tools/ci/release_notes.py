"""The version a release is cut for, and its notes from CHANGELOG.md.

The release workflow (``.github/workflows/release.yml``) runs this before it
builds anything, so that a tag which is not the version written in
``vllm_overlay/__init__.py`` (the one place it is written) is refused before
a file reaches the package index, and so is a version CHANGELOG.md says
nothing about:

    python tools/ci/release_notes.py check-tag TAG   # prints version=X.Y.Z
    python tools/ci/release_notes.py notes VERSION   # that section's body

Exit 0, or 2 (refused: the tag is not ``v`` + the version, or the changelog
has no section for it) with the reason on stderr.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHANGELOG = ROOT / "CHANGELOG.md"
EXIT_REFUSED = 2

TAG = re.compile(r"v(\d+\.\d+\.\d+)")
"""A release tag: ``v`` and a plain X.Y.Z version."""
SECTION = re.compile(r"^## \[(?P<name>[^\]]+)\](?P<rest>.*)$", re.MULTILINE)
"""A Keep a Changelog section heading: ``## [0.1.0] - 2026-12-02``."""


class Refused(Exception):
    """What the release cannot be cut from; exit 2."""


def written_version() -> str:
    """``vllm_overlay.__version__`` of this checkout (the package imports
    nothing, so this runs before anything is installed)."""
    sys.path.insert(0, str(ROOT))
    from vllm_overlay import __version__

    return __version__


def check_tag(tag: str, version: str) -> str:
    """``version`` when ``tag`` is exactly ``v`` + it; else Refused."""
    match = TAG.fullmatch(tag)
    if match is None:
        raise Refused(f"tag {tag!r} is not a release tag vX.Y.Z")
    if match.group(1) != version:
        raise Refused(
            f"tag {tag!r} does not match the version {version!r} written in "
            f"vllm_overlay/__init__.py: tag v{version}, or change the version"
        )
    return version


def sections(text: str) -> list[tuple[str, str]]:
    """(name, body) of each ``## [name]`` section, in the file's order."""
    heads = list(SECTION.finditer(text))
    found = []
    for head, after in zip(heads, [*heads[1:], None], strict=True):
        end = after.start() if after else len(text)
        found.append((head.group("name"), text[head.end() : end].strip()))
    return found


def top_version(text: str) -> str:
    """The newest released version: the first section that is not Unreleased."""
    for name, _ in sections(text):
        if name.lower() != "unreleased":
            return name
    raise Refused("CHANGELOG.md has no released version section")


def notes(text: str, version: str) -> str:
    """The body of ``version``'s section; Refused when absent or empty."""
    for name, body in sections(text):
        if name == version:
            if not body:
                raise Refused(f"CHANGELOG.md's section {version} is empty")
            return body + "\n"
    raise Refused(f"CHANGELOG.md has no section [{version}]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    steps = parser.add_subparsers(dest="step", required=True)
    tag = steps.add_parser("check-tag", help="refuse a tag that is not v+version")
    tag.add_argument("tag")
    note = steps.add_parser("notes", help="print a version's changelog section")
    note.add_argument("version")
    args = parser.parse_args(argv)
    try:
        if args.step == "check-tag":
            print(f"version={check_tag(args.tag, written_version())}")
        else:
            sys.stdout.write(notes(CHANGELOG.read_text(), args.version))
    except Refused as exc:
        print(f"release: refused: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    return 0


if __name__ == "__main__":
    sys.exit(main())
