"""Regenerate ``patches/`` from the series commits of a checkout.

The commits between the recorded base (``refs/vllm-patchkit/base``, or
``--base``) and HEAD are exported with ``git format-patch`` using options
that make the output a function of the commits alone (zero commit hash in
the From line, no signature, no numbering, fixed blob abbreviation), so
running it twice gives byte-identical files. Patches whose commits are gone
(dropped as upstreamed) leave the series, except a patch the series does
not carry for the checkout's release (its ``Affects:`` range) and whose
invariant does not hold there: it has no commit there by design, so its
file and line are kept byte for byte. Comment and blank lines of the
series file stay where they were. The series is read with the same
validated loader as every other command, and every file written or
removed is checked to resolve to a file directly inside the patches
directory.

A patch keeps its file name while its subject does: format-patch numbers
from 1, and renaming 0002 to 0001 after a drop would make a review of the
refreshed series show a deletion and an addition instead of no change.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from vllm_patchkit.errors import InputError
from vllm_patchkit.git.carry import read_version
from vllm_patchkit.git.checkout import (
    BASE_REF,
    carry_of,
    invariant_holds,
    open_checkout,
)
from vllm_patchkit.git.revs import check_revision
from vllm_patchkit.git.series import inside, load_series, series_entries

FORMAT_PATCH_OPTIONS = (
    "--zero-commit",
    "--no-signature",
    "--no-numbered",
    "--no-color",
    # The default abbreviation grows with the repository's object count, so
    # the same commit would export differently from a fork and a release.
    "--abbrev=7",
)


class RefreshRefused(InputError):
    """Nothing to export (no base, or no commit on it); nothing was written."""


@dataclass
class RefreshResult:
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    """Patches with no commit here that the series does not carry for this
    checkout's release: their files and series lines are left as they are."""
    base: str = ""


def refresh_series(
    path: Path, patches_dir: Path, base: str | None = None
) -> RefreshResult:
    git = open_checkout(path)
    base_ref = BASE_REF if base is None else check_revision(base, "--base")
    base_commit = git.commit_of(base_ref)
    if base_commit is None:
        raise RefreshRefused(
            f"{path}: no base to export from ({base_ref} is unknown); run apply or "
            "rebase first, or pass --base"
        )
    result = RefreshResult(base=base_commit)
    series_file = patches_dir / "series"
    # The same validated reader as every other command: a name that leaves
    # the directory, or a malformed patch, stops the run before any write.
    if series_file.exists() or series_file.is_symlink():
        old_series = load_series(patches_dir)
        entries = series_entries(series_file)
    else:
        old_series, entries = None, []
    old_names = [name for _, name in entries if name is not None]
    version = read_version(git.root)
    # Upstreamed comes before not-carried, as in classify: a patch upstream
    # carries here leaves the series even where it is not carried.
    not_carried_here = {
        p.name
        for p in (old_series.patches if old_series else ())
        if not carry_of(p, git.root, version).carried and not invariant_holds(git, p)
    }
    series_target = inside(patches_dir, "series")
    with tempfile.TemporaryDirectory(prefix="vllm-patchkit-refresh-") as scratch:
        git.run(
            "format-patch",
            *FORMAT_PATCH_OPTIONS,
            "-o",
            scratch,
            f"{base_commit}..HEAD",
            "--",
        )
        fresh = sorted(Path(scratch).glob("*.patch"))
        if not fresh:
            # A series file without patches is refused by every command; the
            # end of the series is a decision for a person, not for refresh.
            raise RefreshRefused(
                f"{path}: no commits between the base and HEAD: the branch "
                f"carries no patch of the series; {patches_dir} was left as it is"
            )
        names = stable_names([p.name for p in fresh], old_names)
        targets = [inside(patches_dir, name) for name in names]
        # A patch the series does not carry for this checkout's release has
        # no commit here; that says nothing about whether it is still needed
        # where it is carried, so its file and series line stay as they are.
        result.kept = [n for n in old_names if n not in names and n in not_carried_here]
        stale = [
            inside(patches_dir, n)
            for n in old_names
            if n not in names and n not in result.kept
        ]
        for patch, name, target in zip(fresh, names, targets, strict=True):
            content = patch.read_bytes()
            if not target.is_file() or target.read_bytes() != content:
                target.write_bytes(content)
                result.changed.append(name)
            result.written.append(name)
    for target in stale:
        target.unlink(missing_ok=True)
        result.removed.append(target.name)
    listed = with_kept(result.written, result.kept, old_names)
    series_target.write_text(rewrite_series(entries, listed))
    return result


def with_kept(names: list[str], kept: list[str], old: list[str]) -> list[str]:
    """``names`` with each kept name put back after the name that came
    before it in the old series (or first)."""
    listed = list(names)
    for name in kept:
        before = old[: old.index(name)]
        anchors = [listed.index(n) for n in before if n in listed]
        listed.insert(anchors[-1] + 1 if anchors else 0, name)
    return listed


def rewrite_series(entries: list[tuple[str, str | None]], names: list[str]) -> str:
    """The series file listing ``names``, every other line kept in place.

    Comment and blank lines (indented or not) stay where they were; a kept
    patch keeps its own line (with any comment on it), in the new order; a
    removed patch's line goes; a new patch goes right after the patch before
    it in ``names``, or where the first patch line was.
    """
    old = {name: raw for raw, name in entries if name is not None}
    slots = iter([n for n in names if n in old])
    lines: list[str] = []
    placed: dict[str, int] = {}
    anchor: int | None = None
    for raw, name in entries:
        if name is None:
            lines.append(raw)
            continue
        if anchor is None:
            anchor = len(lines)
        if name in names:
            slot = next(slots)
            placed[slot] = len(lines)
            lines.append(old[slot])
    for index, name in enumerate(names):
        if name in placed:
            continue
        before = [placed[n] for n in names[:index] if n in placed]
        if before:
            at = before[-1] + 1
        elif placed:
            at = min(placed.values())
        else:
            at = len(lines) if anchor is None else anchor
        lines.insert(at, name)
        placed = {n: i + (i >= at) for n, i in placed.items()}
        placed[name] = at
    return "\n".join(lines) + "\n"


def stable_names(fresh: list[str], old: list[str]) -> list[str]:
    """format-patch's names, with each old name kept for the same subject.

    A new subject is numbered after the highest number in use.
    """
    # format-patch cuts subjects to 52 characters, so two patches can share
    # a slug: each old name is handed out once, in order.
    unclaimed = list(old)
    kept: list[str | None] = []
    for name in fresh:
        match = next((o for o in unclaimed if _slug(o) == _slug(name)), None)
        if match is not None:
            unclaimed.remove(match)
        kept.append(match)
    used = [_number(name) for name in kept if name is not None]
    next_number = max(used, default=0) + 1
    names = []
    for name, old_name in zip(fresh, kept, strict=True):
        if old_name is None:
            old_name = f"{next_number:04d}-{_slug(name)}"
            next_number += 1
        names.append(old_name)
    return names


def _slug(name: str) -> str:
    number, _, rest = name.partition("-")
    return rest if number.isdigit() else name


def _number(name: str) -> int:
    number = name.partition("-")[0]
    return int(number) if number.isdigit() else 0
