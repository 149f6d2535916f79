"""Regenerate ``patches/`` from the series commits of a checkout.

The commits between the recorded base (``refs/vllm-patchkit/base``, or
``--base``) and HEAD are exported with ``git format-patch`` using options
that make the output a function of the commits alone (zero commit hash in
the From line, no signature, no numbering, fixed blob abbreviation), so
running it twice gives byte-identical files. A patch of the series with no
commit here (upstream carries it on this release, or the series does not
carry it for this release) keeps its file byte for byte and its line in
``series``, in order: older releases in its ``Affects:`` range still need
it. It leaves only when its whole range is upstream
(:func:`vllm_patchkit.git.ranges.needed_elsewhere`). On the newest release,
each patch's ``Affects:``/``Applied-Upstream:`` trailers follow the base's
code (:func:`vllm_patchkit.git.ranges.judge_ranges`), rewritten in place
and nothing else in the file. Comment and blank lines of the series file
stay where they were. The series is read with the same validated loader as
every other command, and every file written or removed is checked to
resolve to a file directly inside the patches directory.

A patch keeps its file name while its subject does: format-patch numbers
from 1, and renaming 0002 to 0001 after a drop would make a review of the
refreshed series show a deletion and an addition instead of no change.
"""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from vllm_patchkit.errors import InputError
from vllm_patchkit.git.carry import read_version
from vllm_patchkit.git.checkout import BASE_REF, open_checkout
from vllm_patchkit.git.ranges import (
    RangeJudgement,
    Ranges,
    judge_ranges,
    needed_elsewhere,
    with_range,
)
from vllm_patchkit.git.revs import check_revision
from vllm_patchkit.git.series import (
    Patch,
    SeriesError,
    inside,
    load_series,
    parse_patch,
    series_entries,
)
from vllm_patchkit.git.trial_tree import TrialTree
from vllm_patchkit.gitcmd import Git

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
    """Patches of the series with no commit here that older (or other)
    releases still need: their files and series lines stay (a file's
    trailers change only as ``ranges`` says)."""
    why_kept: dict[str, str] = field(default_factory=dict)
    base: str = ""
    ranges: Ranges = field(default_factory=lambda: Ranges(None))
    """Each patch's ``Affects:`` range as the base's code says (recorded on
    the newest release only): what changed is written into the files."""


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
    old_patches = {p.name: p for p in (old_series.patches if old_series else ())}
    version = read_version(git.root)
    series_target = inside(patches_dir, "series")
    with tempfile.TemporaryDirectory(prefix="vllm-patchkit-refresh-") as scratch:
        exported = Path(scratch) / "exported"
        git.run(
            "format-patch",
            *FORMAT_PATCH_OPTIONS,
            "-o",
            str(exported),
            f"{base_commit}..HEAD",
            "--",
        )
        fresh = sorted(exported.glob("*.patch"))
        if not fresh:
            # A series file without patches is refused by every command; the
            # end of the series is a decision for a person, not for refresh.
            raise RefreshRefused(
                f"{path}: no commits between the base and HEAD: the branch "
                f"carries no patch of the series; {patches_dir} was left as it is"
            )
        names = stable_names([p.name for p in fresh], old_names)
        # A patch with no commit here stays unless its whole range is upstream.
        for name in old_names:
            why = None if name in names else needed_elsewhere(old_patches[name])
            if why is not None:
                result.kept.append(name)
                result.why_kept[name] = why
        stale = [n for n in old_names if n not in names and n not in result.kept]
        # Every path is checked before anything is written.
        targets = {n: inside(patches_dir, n) for n in [*names, *result.kept, *stale]}
        sources = dict(zip(names, fresh, strict=True))
        sources |= {n: targets[n] for n in result.kept}
        mails = {n: _exported(n, p) for n, p in zip(names, fresh, strict=True)}
        judged = {**mails, **{n: old_patches[n] for n in result.kept}}
        listed = with_kept(names, result.kept, old_names)
        upstream = upstream_code(git, base_commit, Path(scratch) / "upstream")
        in_order = [judged[n] for n in listed]
        result.ranges = judge_ranges(
            [p for p in in_order if p is not None], upstream, version, git
        )
        # Every text is made before any file is written: a trailer that
        # cannot be rewritten leaves patches/ as it was.
        contents = {
            name: _recorded(source.read_bytes(), result.ranges.of(name))
            for name, source in sources.items()
        }
    result.written = list(names)
    for name in [*names, *result.kept]:
        target, content = targets[name], contents[name]
        if not target.is_file() or target.read_bytes() != content:
            target.write_bytes(content)
            result.changed.append(name)
    for name in stale:
        targets[name].unlink(missing_ok=True)
        result.removed.append(targets[name].name)
    series_target.write_text(rewrite_series(entries, listed))
    return result


def upstream_code(git: Git, base: str, scratch: Path) -> Path:
    """The checkout as upstream has it at ``base``: a :class:`TrialTree`
    taking from ``base`` the files that differ from it; nothing is written
    to the checkout or its git directory."""
    listed = git.run("diff", "--name-only", "-z", "--no-renames", base, "--").stdout
    paths = [name for name in listed.split("\0") if name]
    if not paths:
        return git.root
    scratch.mkdir()
    index = {"GIT_INDEX_FILE": str(scratch / "index")}
    git.run("read-tree", base, env=index)
    tree = TrialTree(git, scratch)
    tree.take_from_index(paths, index)
    return tree.root


def _exported(name: str, path: Path) -> Patch | None:
    """The exported mail as the patch ``name`` (a commit that is no patch,
    an empty one, is not judged)."""
    try:
        return dataclasses.replace(parse_patch(path), path=path.with_name(name))
    except SeriesError:
        return None


def _recorded(content: bytes, judgement: RangeJudgement | None) -> bytes:
    """``content`` with a changed range written into its trailers; else as it is."""
    if judgement is None or not judgement.changed:
        return content
    text = content.decode("utf-8", "surrogateescape")
    return with_range(text, judgement).encode("utf-8", "surrogateescape")


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
    """The series file listing ``names``, every other line kept in place: a
    kept patch keeps its own line (with any comment on it), in the new
    order; a new patch goes right after the patch before it in ``names``, or
    where the first patch line was."""
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
