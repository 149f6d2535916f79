"""Each patch's recent history, read with one ``git log`` for the series.

:func:`vllm_patchkit.git.checkout.history` needs, per patch, what ``git log
-p --max-count=LIMIT HEAD -- FILES`` prints. One ``git log`` per patch was
a git process each (``check`` runs in a pre-commit hook, issue #38), so one
log over every patch's files is split per patch: a commit's diff is a
section per file, independent of the other paths asked for, except where
git pairs two as a rename or a copy. A patch the split cannot give exactly
as its own log would (the shared log may stop short of its last ``LIMIT``
commits, a rename or copy, a merge, paths git prints otherwise than
``a/PATH b/PATH``, a pathspec that is not plain) gets its own ``git log``.
On a history with merges a wider set of paths may make git walk the other
side of a merge, whose commits leave the patch's files as the merge has
them.
"""

from __future__ import annotations

from vllm_patchkit.git.series import Patch
from vllm_patchkit.gitcmd import Git

_Commit = tuple[str, list[tuple[str, str]]]
"""A commit's header lines and its diff sections, each ``(path, text)``."""


def recent_diffs(git: Git, patches: list[Patch], limit: int) -> dict[str, str]:
    """Each patch's ``git log -p`` text (:meth:`Git.commit_diffs`) of its
    last ``limit`` commits touching its files, by patch name."""
    if len(patches) == 1:
        return {patches[0].name: _own_log(git, patches[0], limit)}
    window = limit * len(patches)
    paths = sorted({name for patch in patches for name in patch.files})
    commits = _split(git.commit_diffs(f"--max-count={window}", "HEAD", "--", *paths))
    complete = commits is not None and len(commits) < window
    texts = {}
    for patch in patches:
        text = None
        if commits is not None and all(map(_plain, patch.files)):
            text = _patch_log(commits, patch.files, limit, complete)
        texts[patch.name] = text if text is not None else _own_log(git, patch, limit)
    return texts


def _own_log(git: Git, patch: Patch, limit: int) -> str:
    return git.commit_diffs(f"--max-count={limit}", "HEAD", "--", *patch.files)


def _patch_log(
    commits: list[_Commit], files: tuple[str, ...], limit: int, complete: bool
) -> str | None:
    """What ``git log -p`` limited to ``files`` prints, from the shared
    log's ``commits``; None when they may not hold all of it."""
    chunks: list[str] = []
    taken = 0
    for header, sections in commits:
        mine = [text for path, text in sections if _matches(path, files)]
        if not mine:
            continue
        if taken == limit:
            return "".join(chunks)
        chunks.append(header)
        chunks.extend(mine)
        taken += 1
    return "".join(chunks) if complete or taken == limit else None


def _split(log: str) -> list[_Commit] | None:
    """The commits of a ``git log --format='commit %H' --patch`` text; None
    when a commit has no diff (a merge) or a section is not one path's."""
    commits: list[tuple[list[str], list[tuple[str, list[str]]]]] = []
    for line in log.splitlines(keepends=True):
        if line.startswith("commit "):
            commits.append(([line], []))
        elif line.startswith("diff "):
            path = _section_path(line)
            if path is None or not commits:
                return None
            commits[-1][1].append((path, [line]))
        elif commits and commits[-1][1]:
            commits[-1][1][-1][1].append(line)
        elif commits:
            commits[-1][0].append(line)
    if any(not sections for _, sections in commits):
        return None
    return [
        ("".join(header), [(path, "".join(text)) for path, text in sections])
        for header, sections in commits
    ]


def _section_path(line: str) -> str | None:
    """The path of a ``diff --git a/PATH b/PATH`` line; None for any other
    (a rename or copy, a quoted path, other prefixes)."""
    rest = line.removeprefix("diff --git ").rstrip("\n")
    if rest == line.rstrip("\n") or len(rest) % 2 == 0:
        return None
    path = rest[2 : (len(rest) - 1) // 2]
    return path if rest == f"a/{path} b/{path}" and path else None


def _matches(path: str, files: tuple[str, ...]) -> bool:
    """Whether a plain pathspec of ``files`` matches ``path``: the path
    itself, or a directory above it."""
    return any(path == name or path.startswith(f"{name}/") for name in files)


def _plain(name: str) -> bool:
    """A pathspec that matches by name only: no wildcard, no magic."""
    return not name.startswith(":") and not any(c in name for c in "*?[\\")
