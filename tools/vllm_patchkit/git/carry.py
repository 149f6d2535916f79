"""Whether the series carries a patch for a tree: by its code, else its version.

The one place that decides it (apply, check, doctor, rebase, refresh and
``test`` all ask :func:`decide`). Two rules, in this order:

* the code rule: the patch's fix finds the bug's shape in the tree (the
  fix's rule for the patch's ``Invariant:``; see :func:`read_code`). Where
  the code can be read it decides, on any release: a release newer than
  every ``Affects:`` range (one nobody had seen when the series was
  written) is carried exactly when its code is still buggy, and a tree
  whose code upstream fixed is not, whatever its tag says;
* the version rule: the tree's release is inside the patch's ``Affects:``
  range (:meth:`vllm_patchkit.git.series.Patch.carried_for`), used only
  where the code cannot be read (an alias, a rename, a patch without a code
  rule), and then only if the tree can vouch for its version
  (:func:`read_version`: a ``_version.py`` naming a release, or its tag
  near HEAD, and code that does not contradict it); the reason says the
  version decided. Otherwise the patch is skipped with the reason, never
  tried blind.

On every release tree the two agree (a test reads 0.11.0 to the newest);
where they do not, the reason says the code decided, and why.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from vllm_overlay.code import Code, Shape, declared_reads
from vllm_overlay.fixes import FIXES
from vllm_overlay.record import PatchTarget
from vllm_overlay.releases import Release, parse_release
from vllm_patchkit.git.code_readings import read_cached, read_tree_cached
from vllm_patchkit.git.invariants import INVARIANTS
from vllm_patchkit.git.series import Patch
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.trees.versions import (
    claimed_version,
    parse_range,
    tag_release,
    tree_release,
)

NOT_FOR = (Shape.NOT_FOR, Shape.MISSING)
"""The shapes of code a fix or a patch is not for."""
NEAR_TAG = 100
"""Commits past its release tag within which a checkout is still that
release (a user's own commits, the series): vLLM makes hundreds of commits
between releases, so a checkout further on is a fork or a development tree
whose tag says little about its code."""


@dataclass(frozen=True)
class TreeVersion:
    """What a tree claims to be, and whether that can be trusted."""

    version: str
    release: Release | None
    trusted: bool
    why: str
    """Why it cannot be trusted (empty when it can)."""


def read_version(root: Path) -> TreeVersion:
    """The tree's version (:func:`vllm_patchkit.trees.versions.tree_release`) and
    whether it can vouch for its code: a ``_version.py`` or dist-info naming
    a release, or a release tag at most :data:`NEAR_TAG` commits below HEAD;
    and the code does not contradict it (:func:`contradiction`)."""
    version, release = tree_release(root)
    if release is None:
        return TreeVersion(version, None, False, f"version {version} names no release")
    why = contradiction(root, release) or _far_from_tag(root, version, release)
    return TreeVersion(version, release, why is None, why or "")


def _far_from_tag(root: Path, version: str, release: Release) -> str | None:
    """Why a checkout without a version file naming ``release`` cannot
    vouch for it by its tag; None when it can."""
    claimed = claimed_version(root)
    if claimed is not None and parse_release(claimed) == release:
        return None
    if not (root / ".git").exists():
        return None
    git = Git(root)
    # Without a claimed version, tree_release's version is the tag itself.
    tag = version if claimed is None else tag_release(git)
    proc = git.run("rev-list", "--count", f"v{tag}..HEAD", check=False)
    count = proc.stdout.strip()
    if tag is None or proc.returncode != 0 or not count.isdigit():
        return "no release tag near HEAD"
    if int(count) > NEAR_TAG:
        return (
            f"HEAD is {count} commits past the tag v{tag}, which says little "
            "about its code"
        )
    return None


def contradiction(root: Path, release: Release) -> str | None:
    """Why the tree's code is not what ``release`` ships, if it is not.

    Each fix's record ties its code (:attr:`Fix.read_tree
    <vllm_overlay.fixes.base.Fix.read_tree>`) to releases: before its
    ``affected`` range the code is absent or of a release the fix is not
    for; within it, buggy (or fixed, once the series is applied); from its
    ``inert_from``, fixed. Code that cannot be judged contradicts nothing.
    """
    for fix in FIXES:
        if fix.read_tree is not None:
            code = read_tree_cached(
                f"fix:{fix.name}",
                root,
                functools.partial(fix.read_tree, root),
                declared_reads(fix.read_tree),
            )
            why = _against_record(fix.record, code, release)
            if why is not None:
                return why
    return None


def _against_record(record: PatchTarget, code: Code, release: Release) -> str | None:
    if not code.judged:
        return None
    span = parse_range(record.affected)
    fixed_from = parse_release(record.inert_from)
    if release < span.first:
        shapes, era = NOT_FOR, f"before {span.first}"
    elif span.last is None or release <= span.last:
        shapes, era = (Shape.BUGGY, Shape.FIXED), record.affected
    elif fixed_from is not None and release >= fixed_from:
        shapes, era = (Shape.FIXED,), f"{fixed_from} on"
    else:
        return None
    if code.shape in shapes:
        return None
    return (
        f"the code contradicts it: {record.qualname} is {code.shape}, not what "
        f"releases {era} ship"
    )


def read_code(patch: Patch, root: Path) -> Code | None:
    """The patch's code rule on ``root`` (its fix's rule for its
    ``Invariant:``, :mod:`vllm_patchkit.git.invariants`); None for a patch
    without one. Readings are kept by their content (large files', and the
    whole reading's where the tree's content is known)."""
    rule = INVARIANTS.get(patch.invariant or "")
    if rule is None:
        return None
    return read_tree_cached(
        f"carry:{rule.invariant}",
        root,
        lambda: rule.carry(root, read_cached),
        declared_reads(rule.carry),
    )


def _why(code: Code) -> str:
    """What the code rule found, in the words of a carry decision."""
    match code.shape:
        case Shape.MISSING:
            return f"target missing: {code.detail}"
        case Shape.NOT_FOR:
            return f"the shape of a release the patch is not for: {code.detail}"
    return code.detail


@dataclass(frozen=True)
class Carry:
    """Whether the series carries one patch for one tree, and why."""

    carried: bool
    why: str
    """For a patch not carried, the reason; for one carried against what
    the version says, why the code won; for one carried by its version
    because its code could not be read, that (starting :data:`BY_VERSION`).
    Empty otherwise."""
    fixed: bool = False
    """Upstream carries the fix here: the code has its fixed shape (or,
    where the code cannot be read, a trusted release is at or after the
    patch's ``Applied-Upstream:``)."""
    overrides: bool = False
    """The code decided against what the version says."""


def decide(patch: Patch, root: Path, version: TreeVersion) -> Carry:
    """Whether the series carries ``patch`` for the tree at ``root``, by the
    module's two rules: of the code read, the bug's shape is carried, the
    fixed shape is upstream's, any other is not the patch's; where that goes
    against ``Affects:`` the reason says so."""
    by_version = patch.carried_for(version.release)
    code = read_code(patch, root)
    if code is None or not code.judged:
        return _by_version(patch, code, version, by_version)
    by_code = code.shape is Shape.BUGGY
    fixed = code.shape is Shape.FIXED
    if version.release is None or by_code == by_version:
        if by_code:
            return Carry(True, "", fixed)
        if version.trusted:
            detail = f"{not_carried_detail(patch, version.version)}: {_why(code)}"
        else:
            said = f"vLLM {version.version}: {version.why}"
            detail = f"by its code ({said}): {_why(code)}"
        return Carry(False, detail, fixed)
    said = "carries" if by_version else "does not carry"
    affects = f"Affects: {patch.affects}" if patch.affects else "no Affects"
    trust = f"; {version.why}" if version.why else ""
    return Carry(
        by_code,
        f"the code decides, not the version: by its version (vLLM "
        f"{version.version}{trust}) the series {said} it ({affects}), "
        f"but {_why(code)}",
        fixed,
        overrides=True,
    )


def _by_version(
    patch: Patch, code: Code | None, version: TreeVersion, by_version: bool
) -> Carry:
    """The decision where the patch's code cannot be read (or it has no code
    rule): a version the tree vouches for decides, and says so; otherwise
    the patch is skipped, never tried blind."""
    if code is not None and not version.trusted:
        return Carry(
            False,
            f"skipped: its code cannot be judged ({_why(code)}) and the "
            f"version cannot be trusted ({version.why}); apply it by hand "
            "if you know better",
        )
    since, release = patch.applied_upstream, version.release
    fixed = release is not None and since is not None and release >= since
    unread = (
        f"; its code could not be read, so the version decided: {_why(code)}"
        if code is not None
        else ""
    )
    if by_version:
        said = f"{BY_VERSION} (Affects: {patch.affects}){unread}"
        return Carry(True, said if unread else "", fixed)
    return Carry(False, not_carried_detail(patch, version.version) + unread, fixed)


BY_VERSION = "by its version"
"""How :attr:`Carry.why` starts for a patch carried by its version alone,
its code unread (every other carried reason is the code's)."""


def not_carried_detail(patch: Patch, version: str) -> str:
    return (
        f"the series does not carry this patch for vLLM {version} "
        f"(Affects: {patch.affects})"
    )
