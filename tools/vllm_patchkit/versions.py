"""vLLM release numbers: what release a tree is, and ranges of releases.

A patch's ``Affects:`` trailer names the releases the series carries it
for; whether a tree is one of them needs its release number. Only a plain
release (``0.28.0``, or a local build of it such as ``0.28.0+rocm700``) is a
release here: a development or pre-release version (``0.29.1.dev12+g...``,
``0.29.0rc1``), a ``git describe`` of a checkout, or no version at all is
unknown, and an unknown tree is never outside a range, so a patch is tried
there (or recognised as upstreamed by its invariant) rather than skipped.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from vllm_patchkit.errors import InputError
from vllm_patchkit.gitcmd import Git

_RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:\+[0-9A-Za-z.]+)?$")

Release = tuple[int, int, int]


def parse_release(text: str) -> Release | None:
    """``(0, 28, 0)`` for ``0.28.0`` (or ``0.28.0+local``); None otherwise."""
    match = _RELEASE.match(text.strip())
    if match is None:
        return None
    major, minor, micro = (int(g) for g in match.groups())
    return major, minor, micro


def release_text(release: Release) -> str:
    return ".".join(map(str, release))


@dataclass(frozen=True)
class ReleaseRange:
    """``first..last`` inclusive; ``last`` None: every release from ``first``."""

    first: Release
    last: Release | None

    def __contains__(self, release: Release) -> bool:
        return self.first <= release and (self.last is None or release <= self.last)

    def __str__(self) -> str:
        last = "" if self.last is None else release_text(self.last)
        return f"{release_text(self.first)}..{last}"


def parse_range(text: str) -> ReleaseRange:
    """``A..B`` or ``A..`` of plain releases, ``A <= B``; InputError otherwise."""
    first_text, dots, last_text = text.strip().partition("..")
    first = parse_release(first_text)
    last = parse_release(last_text) if last_text else None
    if not dots or first is None or (last_text and last is None):
        raise InputError(
            f"{text!r} is not a release range such as 0.11.1..0.28.0 or 0.29.0.."
        )
    if last is not None and last < first:
        raise InputError(f"{text!r}: the range ends before it starts")
    return ReleaseRange(first, last)


def tree_version(root: Path) -> str:
    """The version a tree claims: vllm/_version.py, else its dist-info, else
    ``git describe``, else ``unknown``. Read, never imported."""
    version_file = root / "vllm" / "_version.py"
    if version_file.is_file():
        try:
            module = ast.parse(version_file.read_text())
        except (SyntaxError, ValueError, OSError):
            module = ast.Module(body=[], type_ignores=[])
        for node in ast.walk(module):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                names = {t.id for t in node.targets if isinstance(t, ast.Name)}
                if names & {"__version__", "version"}:
                    return str(node.value.value)
    dist_info = sorted(root.glob("vllm-*.dist-info"))
    if dist_info:
        return dist_info[-1].name.removeprefix("vllm-").removesuffix(".dist-info")
    if not (root / ".git").exists():
        return "unknown"
    proc = Git(root).run("describe", "--tags", "--always", check=False)
    return proc.stdout.strip() if proc.returncode == 0 else "unknown"


def tree_release(root: Path) -> tuple[str, Release | None]:
    """The version a tree claims and, when it is a plain release, its number."""
    version = tree_version(root)
    return version, parse_release(version)
