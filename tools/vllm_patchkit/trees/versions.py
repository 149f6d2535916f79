"""vLLM release numbers: what release a tree is, and ranges of releases.

A patch's ``Affects:`` trailer names the releases the series carries it
for; whether a tree is one of them needs its release number, read the way
vLLM's users have their trees. A release is ``X.Y.Z`` or ``X.Y.Z.W``
(``0.10.1.1``), with or without a local part (``0.28.0+rocm700``). A tree
claims one through, in order: ``vllm/_version.py`` or a dist-info naming a
release (source and wheel releases ship them); the nearest release tag
``vX.Y.Z`` reachable from HEAD of a git checkout (vLLM's ``.gitignore``
keeps ``_version.py`` out of git, so a checkout of a tag has none until an
install writes it; commits on top, the series or a user's own, keep the
tag's release); a setuptools-scm development version (``0.17.1.dev2+g...``,
two commits after ``v0.17.0``), which is its tag's release. A pre-release
(``0.29.0rc1``), or no version at all, is unknown, and an unknown tree is
never outside a range, so a patch is tried there (or recognised as
upstreamed by its invariant) rather than skipped.

A release string itself is read by :mod:`vllm_overlay.releases`, which the
overlay shares; this module adds trees, tags and the toolkit's refusals.
"""

from __future__ import annotations

import ast
from pathlib import Path

from vllm_overlay.releases import (
    Release,
    ReleaseRange,
    parse_release,
    release_range,
    version_release,
)
from vllm_patchkit.errors import InputError
from vllm_patchkit.gitcmd import Git

_NOT_RELEASE_TAGS = ("*rc*", "*dev*", "*post*", "*[ab][0-9]*")
"""Tags ``git describe`` skips at once; any other tag that is not a release
is skipped by name, one describe each (:func:`tag_release`)."""
_MAX_DESCRIBES = 20


def parse_tag(tag: str) -> Release | None:
    """The release a tag ``v0.17.0`` names; None for any other tag."""
    if not tag.startswith("v") or "+" in tag:
        return None
    return parse_release(tag.removeprefix("v"))


def require_release(text: str, what: str = "version") -> Release:
    """:func:`parse_release`, refusing anything else (InputError, exit 2)."""
    release = parse_release(text)
    if release is None:
        raise InputError(
            f"{what} {text!r} is not a vLLM release such as 0.28.0 or 0.10.1.1 "
            "(no v, pre-release, development version or git describe output)"
        )
    return release


def parse_range(text: str) -> ReleaseRange:
    """:func:`vllm_overlay.releases.release_range`, or InputError (exit 2)
    saying what a range looks like."""
    span = release_range(text)
    if span is not None:
        return span
    first, _, last = (part.strip() for part in text.partition(".."))
    if (a := parse_release(first)) and (b := parse_release(last)) and b < a:
        raise InputError(f"{text!r}: the range ends before it starts")
    raise InputError(
        f"{text!r} is not a release range such as 0.11.1..0.28.0 or 0.29.0.."
    )


def tag_release(git: Git, rev: str = "HEAD") -> str | None:
    """``0.17.0`` when ``v0.17.0`` is the nearest release tag reachable from
    ``rev`` (pre-release and other tags skipped); None when there is none."""
    excluded = list(_NOT_RELEASE_TAGS)
    for _ in range(_MAX_DESCRIBES):
        options = [f"--exclude={pattern}" for pattern in excluded]
        proc = git.run(
            "describe",
            "--tags",
            "--abbrev=0",
            "--match=v[0-9]*",
            *options,
            rev,
            check=False,
        )
        tag = proc.stdout.strip()
        if proc.returncode != 0 or not tag:
            return None
        if parse_tag(tag) is not None:
            return tag.removeprefix("v")
        excluded.append(tag)
    return None


def claimed_version(root: Path) -> str | None:
    """The version ``vllm/_version.py`` or a ``vllm-*.dist-info`` names
    (read, never imported); None when neither does."""
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
    return None


def tree_release(root: Path) -> tuple[str, Release | None]:
    """The version a tree claims, and the release it is (None: unknown).

    See the module docstring for the order; the version is what the tree
    says (``0.17.1.dev2+gabc1234``, or the tag's ``0.17.0``), for reports.
    """
    claimed = claimed_version(root)
    if claimed is not None and (release := parse_release(claimed)) is not None:
        return claimed, release
    if (root / ".git").exists():
        tag = tag_release(Git(root))
        if tag is not None:
            return claimed or tag, parse_release(tag)
    if claimed is not None:
        return claimed, version_release(claimed)
    return "unknown", None


RELEASE_ENV = "VLLM_PATCHKIT_TREE_RELEASE"
"""The release of the tree under test as the toolkit reads it (empty:
unknown), set by the parent (:meth:`vllm_patchkit.trees.tree_process.TreeLauncher.env`):
a checkout has no ``_version.py`` (vLLM's ``__version__`` is then ``dev``),
its release tag does. Being in the run's environment, it is in the report
cache's key."""
