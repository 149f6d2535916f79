"""Regenerate ``patches/`` from the series commits of a checkout.

The commits between the recorded base (``refs/vllm-patchkit/base``, or
``--base``) and HEAD are exported with ``git format-patch`` using options
that make the output a function of the commits alone (zero commit hash in
the From line, no signature, no numbering, fixed blob abbreviation), so
running it twice gives byte-identical files. Patches whose commits are gone (dropped as
upstreamed) leave the series; comment lines of the series file are kept.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from vllm_patchkit.apply import BASE_REF, open_checkout

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
    proc = git.run(
        "rev-parse", "--verify", "--quiet", f"{base_ref}^{{commit}}", check=False
    )
    if proc.returncode != 0:
        raise ValueError(
            f"{path}: no base to export from ({base_ref} is unknown); run apply or "
            "rebase first, or pass --base"
        )
    base_commit = proc.stdout.strip()
    result = RefreshResult(base=base_commit)
    series_file = patches_dir / "series"
    old_lines = series_file.read_text().splitlines() if series_file.is_file() else []
    old_names = [x.strip() for x in old_lines if x.strip() and not x.startswith("#")]
    with tempfile.TemporaryDirectory(prefix="vllm-patchkit-refresh-") as scratch:
        git.run(
            "format-patch", *FORMAT_PATCH_OPTIONS, "-o", scratch, f"{base_commit}..HEAD"
        )
        fresh = sorted(Path(scratch).glob("*.patch"))
        for patch in fresh:
            target = patches_dir / patch.name
            content = patch.read_bytes()
            if not target.is_file() or target.read_bytes() != content:
                target.write_bytes(content)
                result.changed.append(patch.name)
            result.written.append(patch.name)
    for name in old_names:
        if name not in result.written:
            (patches_dir / name).unlink(missing_ok=True)
            result.removed.append(name)
    header = [x for x in old_lines if x.startswith("#")]
    series_file.write_text("\n".join([*header, *result.written]) + "\n")
    return result
