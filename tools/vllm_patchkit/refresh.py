"""Regenerate ``patches/`` from the series commits of a checkout.

The commits between the recorded base (``refs/vllm-patchkit/base``, or
``--base``) and HEAD are exported with ``git format-patch`` using options
that make the output a function of the commits alone (zero commit hash in
the From line, no signature, no numbering, fixed blob abbreviation), so
running it twice gives byte-identical files. Patches whose commits are gone
(dropped as upstreamed) leave the series; comment lines of the series file
are kept. A patch keeps its file name while its subject does: format-patch
numbers from 1, and renaming 0002 to 0001 after a drop would make a review
of the refreshed series show a deletion and an addition instead of no change.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from vllm_patchkit.checkout import BASE_REF, open_checkout

FORMAT_PATCH_OPTIONS = (
    "--zero-commit",
    "--no-signature",
    "--no-numbered",
    "--no-color",
    # The default abbreviation grows with the repository's object count, so
    # the same commit would export differently from a fork and a release.
    "--abbrev=7",
)


@dataclass
class RefreshResult:
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    base: str = ""


def refresh_series(
    path: Path, patches_dir: Path, base: str | None = None
) -> RefreshResult:
    git = open_checkout(path)
    base_ref = base or BASE_REF
    base_commit = git.commit_of(base_ref)
    if base_commit is None:
        raise ValueError(
            f"{path}: no base to export from ({base_ref} is unknown); run apply or "
            "rebase first, or pass --base"
        )
    result = RefreshResult(base=base_commit)
    series_file = patches_dir / "series"
    old_lines = series_file.read_text().splitlines() if series_file.is_file() else []
    old_names = [x.strip() for x in old_lines if x.strip() and not x.startswith("#")]
    with tempfile.TemporaryDirectory(prefix="vllm-patchkit-refresh-") as scratch:
        git.run(
            "format-patch", *FORMAT_PATCH_OPTIONS, "-o", scratch, f"{base_commit}..HEAD"
        )
        fresh = sorted(Path(scratch).glob("*.patch"))
        if not fresh:
            # A series file without patches is refused by every command; the
            # end of the series is a decision for a person, not for refresh.
            raise ValueError(
                f"{path}: no commits between the base and HEAD: upstream carries "
                f"every patch; {patches_dir} was left as it is"
            )
        names = stable_names([p.name for p in fresh], old_names)
        for patch, name in zip(fresh, names, strict=True):
            target = patches_dir / name
            content = patch.read_bytes()
            if not target.is_file() or target.read_bytes() != content:
                target.write_bytes(content)
                result.changed.append(name)
            result.written.append(name)
    for name in old_names:
        if name not in result.written:
            (patches_dir / name).unlink(missing_ok=True)
            result.removed.append(name)
    header = [x for x in old_lines if x.startswith("#")]
    series_file.write_text("\n".join([*header, *result.written]) + "\n")
    return result


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
