"""Whether the series carries a patch for a tree: by its version and by its code.

The one place that decides it (apply, check, doctor, rebase, refresh and
``test`` all ask :func:`decide`). Two rules, kept side by side:

* the version rule: the tree's release is inside the patch's ``Affects:``
  range (:meth:`vllm_patchkit.git.series.Patch.carried_for`);
* the code rule: the patch's fix finds the bug's shape in the tree (per
  patch, keyed by its ``Invariant:``; see :data:`CODE_RULES`).

On every release tree the two agree (a test reads 0.11.0 to 0.33.0). A
version the tree can vouch for decides (:func:`read_version`: a
``_version.py`` naming a release, or its tag near HEAD, and code that does
not contradict it). A fork's version says little: a tag from long ago, no
``_version.py``, or none at all; there the code decides, and the output says
so where it goes against the version. A patch whose code cannot be read on
such a tree is skipped with the reason, never tried blind. Where a version
the tree vouches for decides because the code cannot be read (an alias, a
rename), the reason says so too, carried or not.
"""

from __future__ import annotations

import ast
import enum
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vllm_overlay.code import Shape
from vllm_overlay.fixes.rocm_aiter_unified_builder.code import inspect_aiter_tree
from vllm_overlay.fixes.rocm_capture_host_offsets import (
    RECORD as CAPTURE_HOST_OFFSETS,
)
from vllm_overlay.fixes.rocm_capture_host_offsets.code import (
    ROCM_ATTN,
    inspect_capture_tree,
)
from vllm_overlay.fixes.static_sink_seq_lens import RECORD as STATIC_SINK_SEQ_LENS
from vllm_overlay.fixes.static_sink_seq_lens import inspect_static_sink_tree
from vllm_overlay.metadata_writes import method_def
from vllm_overlay.record import PatchTarget
from vllm_patchkit.git.code_readings import read_cached
from vllm_patchkit.git.series import Patch
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.trees.versions import (
    Release,
    claimed_version,
    parse_release,
    record_range,
    release_text,
    require_release,
    tag_release,
    tree_release,
)

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
    against = contradiction(root, release)
    if against is not None:
        return TreeVersion(version, release, False, against)
    claimed = claimed_version(root)
    if claimed is not None and parse_release(claimed) == release:
        return TreeVersion(version, release, True, "")
    if not (root / ".git").exists():
        return TreeVersion(version, release, True, "")
    git = Git(root)
    # Without a claimed version, tree_release's version is the tag itself.
    tag = version if claimed is None else tag_release(git)
    proc = git.run("rev-list", "--count", f"v{tag}..HEAD", check=False)
    count = proc.stdout.strip()
    if tag is None or proc.returncode != 0 or not count.isdigit():
        return TreeVersion(version, release, False, "no release tag near HEAD")
    if int(count) > NEAR_TAG:
        return TreeVersion(
            version,
            release,
            False,
            f"HEAD is {count} commits past the tag v{tag}, which says little "
            "about its code",
        )
    return TreeVersion(version, release, True, "")


def _record_range(target: PatchTarget) -> tuple[Release, Release, Release]:
    """The record's ``affected`` range (closed) and its ``inert_from``."""
    span = record_range(target.affected)
    assert span.last is not None, target
    return span.first, span.last, require_release(target.inert_from)


def contradiction(root: Path, release: Release) -> str | None:
    """Why the tree's code is not what ``release`` ships, if it is not.

    The overlay's records tie code to releases: the ROCm capture's shape
    (:func:`_capture_contradiction`) and the static-sink builder, which no
    release before its ``affected`` range has (:func:`_sink_contradiction`).
    Code that cannot be judged contradicts nothing.
    """
    return _capture_contradiction(root, release) or _sink_contradiction(root, release)


def _sink_contradiction(root: Path, release: Release) -> str | None:
    """A static-sink builder (buggy or fixed) in a tree whose release is
    older than every release that ships one (a fork's old tag)."""
    first = record_range(STATIC_SINK_SEQ_LENS.affected).first
    if release >= first:
        return None
    code = inspect_static_sink_tree(root)
    if code.shape not in (Shape.BUGGY, Shape.FIXED):
        return None
    return (
        f"the code contradicts it: {STATIC_SINK_SEQ_LENS.qualname} is "
        f"{code.shape}, and no release before {release_text(first)} has it"
    )


def _capture_contradiction(root: Path, release: Release) -> str | None:
    """The ROCm capture's record: before its ``affected`` range no zeroing
    (or no ROCm builder), within it both offsets zeroed (or, once 0001 is
    applied, the fixed shape), from ``inert_from`` the fixed shape."""
    code = inspect_capture_tree(root)
    if not code.judged:
        return None
    first, last, fixed_from = _record_range(CAPTURE_HOST_OFFSETS)
    if release < first:
        shapes, era = (Shape.NOT_FOR, Shape.MISSING), f"before {release_text(first)}"
    elif release <= last:
        shapes = (Shape.BUGGY, Shape.FIXED)
        era = f"{release_text(first)}-{release_text(last)}"
    elif release >= fixed_from:
        shapes, era = (Shape.FIXED,), f"{release_text(fixed_from)} on"
    else:
        return None
    if code.shape in shapes:
        return None
    return (
        f"the code contradicts it: {CAPTURE_HOST_OFFSETS.qualname} is "
        f"{code.shape}, not what releases {era} ship"
    )


class Reading(enum.StrEnum):
    """What a patch's code rule finds in a tree."""

    BUG = "bug"
    """The bug's shape the patch fixes: carried."""
    FIXED = "fixed"
    """The fixed shape: upstream carries it."""
    NOT_FOR = "not-for"
    """The patch's target is missing, or the code has the shape of a release
    the patch is not for."""
    UNREADABLE = "unreadable"
    """The code cannot be read or judged."""


@dataclass(frozen=True)
class CodeReading:
    reading: Reading
    why: str


def _host_offsets(root: Path) -> CodeReading:
    """0001 (#51585): the ROCm capture zeroes the host offsets."""
    code = inspect_capture_tree(root)
    match code.shape:
        case Shape.BUGGY:
            return CodeReading(Reading.BUG, code.detail)
        case Shape.FIXED:
            return CodeReading(Reading.FIXED, code.detail)
        case Shape.MISSING:
            return CodeReading(Reading.NOT_FOR, f"target missing: {_missing(code)}")
        case Shape.NOT_FOR:
            return CodeReading(
                Reading.NOT_FOR,
                f"the shape of a release the patch is not for (0.11.0, before "
                f"the #25983 zeroing): {code.detail}",
            )
    return CodeReading(Reading.UNREADABLE, code.detail)


def _regression_test(root: Path) -> CodeReading:
    """0002: the test of 0001's fix, for a tree whose capture zeroes offsets."""
    code = inspect_capture_tree(root)
    if code.shape in (Shape.BUGGY, Shape.FIXED):
        return CodeReading(Reading.BUG, f"the test guards {code.detail}")
    if code.shape is Shape.MISSING:
        return CodeReading(
            Reading.NOT_FOR, f"target missing: a test of {_missing(code)}"
        )
    if code.shape is Shape.NOT_FOR:
        return CodeReading(
            Reading.NOT_FOR,
            "the shape of a release the patch is not for (0.11.0): nothing "
            f"zeroes the offsets for the test to guard: {code.detail}",
        )
    return CodeReading(Reading.UNREADABLE, code.detail)


RUNNER = Path("vllm/v1/worker/gpu_model_runner.py")
RUNNER_CLASS = "GPUModelRunner"
DUMMY_RUN = "_dummy_run"
BUILD_METADATA = "_build_attention_metadata"


def _aiter_offsets(root: Path) -> CodeReading:
    """0003 (#53821), its record's rule: ROCM_AITER_UNIFIED_ATTN is handed
    the generic ROCm builder, on a runner that replays FULL graphs on
    capture-built metadata (its dummy run builds with
    ``for_cudagraph_capture`` when the runtime mode is FULL: 0.27.0 on)."""
    rocm = inspect_capture_tree(root)
    if rocm.shape is Shape.MISSING:
        return CodeReading(
            Reading.NOT_FOR,
            f"target missing: {_missing(rocm)}, the generic builder whose "
            "capture the patch keeps from AITER unified",
        )
    aiter = inspect_aiter_tree(root)
    if aiter.shape is Shape.FIXED:
        return CodeReading(Reading.FIXED, aiter.detail)
    if aiter.shape is Shape.MISSING:
        return CodeReading(Reading.NOT_FOR, f"target missing: {aiter.detail}")
    if not aiter.judged:
        return CodeReading(Reading.UNREADABLE, aiter.detail)
    return _runner_replays_full(root, aiter.detail)


_FLAG: dict[str, type] = {"text": str, "line": int, "full": bool, "true": bool}
"""One ``for_cudagraph_capture=`` argument of the dummy run's metadata build:
its source, its line, whether it names ``FULL``, whether it is ``True``."""


def _capture_flags(source: bytes) -> list[dict[str, object]]:
    """Every ``for_cudagraph_capture=`` argument of the
    :data:`BUILD_METADATA` calls in ``GPUModelRunner._dummy_run``."""
    module = ast.parse(source, filename=str(RUNNER))
    methods = [
        method_def(node, DUMMY_RUN)
        for node in ast.walk(module)
        if isinstance(node, ast.ClassDef) and node.name == RUNNER_CLASS
    ]
    return [
        {
            "text": ast.unparse(flag),
            "line": flag.lineno,
            "full": any(
                isinstance(n, ast.Attribute) and n.attr == "FULL"
                for n in ast.walk(flag)
            ),
            "true": isinstance(flag, ast.Constant) and flag.value is True,
        }
        for method in methods
        if method is not None
        for call in ast.walk(method)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == BUILD_METADATA
        for keyword in call.keywords
        if keyword.arg == "for_cudagraph_capture"
        for flag in (keyword.value,)
    ]


def _runner_replays_full(root: Path, shared: str) -> CodeReading:
    """The runner's half of 0003's rule; its reading is kept by the file's
    blob id (:mod:`~vllm_patchkit.git.code_readings`): the runner is the
    largest file any rule parses, and it changes only between releases."""
    file = root / RUNNER
    where = f"{RUNNER}: {RUNNER_CLASS}.{DUMMY_RUN}"
    reader = (Path(__file__), Path(method_def.__code__.co_filename))
    try:
        flags = read_cached(
            "carry.runner-capture-flags",
            file.read_bytes(),
            reader,
            _FLAG,
            _capture_flags,
        )
    except (OSError, SyntaxError, ValueError) as exc:
        return CodeReading(Reading.UNREADABLE, f"cannot read {RUNNER}: {exc}")
    if len(flags) != 1:
        return CodeReading(
            Reading.UNREADABLE,
            f"{where}: {len(flags)} calls of {BUILD_METADATA} with "
            "for_cudagraph_capture, not one",
        )
    flag = flags[0]
    text, line = flag["text"], flag["line"]
    if flag["full"]:
        return CodeReading(
            Reading.BUG,
            f"{shared}, and {where} builds FULL-graph replays with "
            f"for_cudagraph_capture={text} (line {line})",
        )
    if flag["true"]:
        return CodeReading(
            Reading.NOT_FOR,
            f"the shape of a release the patch is not for (0.11.1-0.11.2): "
            f"{where} builds every dummy run for capture (line {line}), "
            "code the patch does not apply to as it is; the overlay covers it",
        )
    return CodeReading(
        Reading.NOT_FOR,
        f"the shape of a release the patch is not for (0.12.0-0.26.0): {where} "
        f"builds for capture only when capturing (for_cudagraph_capture="
        f"{text}, line {line}), so no replay reads the zeroed offsets",
    )


def _static_sink(root: Path) -> CodeReading:
    """0004: ``StaticSinkAttentionBuilder.build`` writes the shared seq_lens.

    No upstream release fixes it, so the fixed shape means 0004 (or the same
    change) is in the tree; before 0.14.0 there is no static-sink builder.
    """
    code = inspect_static_sink_tree(root)
    match code.shape:
        case Shape.BUGGY:
            return CodeReading(Reading.BUG, code.detail)
        case Shape.FIXED:
            return CodeReading(Reading.FIXED, code.detail)
        case Shape.MISSING:
            return CodeReading(Reading.NOT_FOR, f"target missing: {code.detail}")
    return CodeReading(Reading.UNREADABLE, code.detail)


def _static_sink_test(root: Path) -> CodeReading:
    """0005: the test of 0004's fix, for a tree with a static-sink builder."""
    code = inspect_static_sink_tree(root)
    if code.shape in (Shape.BUGGY, Shape.FIXED):
        return CodeReading(Reading.BUG, f"the test guards {code.detail}")
    if code.shape is Shape.MISSING:
        return CodeReading(Reading.NOT_FOR, f"target missing: a test of {code.detail}")
    return CodeReading(Reading.UNREADABLE, code.detail)


def _missing(code: object) -> str:
    detail = getattr(code, "detail", "")
    return detail if str(ROCM_ATTN) in detail else f"{ROCM_ATTN}: {detail}"


CODE_RULES: dict[str, Callable[[Path], CodeReading]] = {
    "rocm-capture-zeroes-device-offsets-only": _host_offsets,
    "rocm-capture-regression-test-present": _regression_test,
    "rocm-aiter-unified-capture-keeps-offsets": _aiter_offsets,
    "static-sink-keeps-shared-seq-lens": _static_sink,
    "static-sink-regression-test-present": _static_sink_test,
}
"""Each patch's code rule, by its ``Invariant:`` (the fix it carries)."""


def read_code(patch: Patch, root: Path) -> CodeReading | None:
    """The patch's code rule on ``root``; None for a patch without one."""
    rule = CODE_RULES.get(patch.invariant or "")
    return rule(root) if rule is not None else None


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
    """Whether the series carries ``patch`` for the tree at ``root``.

    A version the tree can vouch for (:func:`read_version`) decides by the
    patch's ``Affects:`` range, the maintainers' word. Otherwise the code
    decides, and where it goes against the version the reason says so; a
    patch whose code cannot be read is then skipped, with the reason.
    """
    by_version = patch.carried_for(version.release)
    code = read_code(patch, root)
    readable = code is not None and code.reading is not Reading.UNREADABLE
    if version.trusted or not readable:
        if code is not None and not readable and not version.trusted:
            return Carry(
                False,
                f"skipped: its code cannot be judged ({code.why}) and the "
                f"version cannot be trusted ({version.why}); apply it by hand "
                "if you know better",
            )
        fixed = _upstream_since(patch, version.release) or bool(
            code and code.reading is Reading.FIXED
        )
        unread = (
            f"; its code could not be read, so the version decided: {code.why}"
            if code is not None and not readable
            else ""
        )
        if by_version:
            said = f"{BY_VERSION} (Affects: {patch.affects}){unread}"
            return Carry(True, said if unread else "", fixed)
        detail = not_carried_detail(patch, version.version) + unread
        if code is not None and code.reading in (Reading.FIXED, Reading.NOT_FOR):
            detail += f": {code.why}"  # the code agrees
        return Carry(False, detail, fixed)
    assert code is not None
    by_code = code.reading is Reading.BUG
    fixed = code.reading is Reading.FIXED
    if version.release is None or by_code == by_version:
        if by_code:
            return Carry(True, "", fixed)
        said = f"vLLM {version.version}: {version.why}"
        return Carry(False, f"by its code ({said}): {code.why}", fixed)
    said = "carries" if by_version else "does not carry"
    affects = f"Affects: {patch.affects}" if patch.affects else "no Affects"
    return Carry(
        by_code,
        f"the code decides, not the version: by its version (vLLM "
        f"{version.version}; {version.why}) the series {said} it ({affects}), "
        f"but {code.why}",
        fixed,
        overrides=True,
    )


BY_VERSION = "by its version"
"""How :attr:`Carry.why` starts for a patch carried by its version alone,
its code unread (every other carried reason is the code's)."""


def _upstream_since(patch: Patch, release: Release | None) -> bool:
    """Whether ``release`` is at or after the patch's ``Applied-Upstream:``."""
    upstream = patch.trailer("Applied-Upstream") or ""
    since = parse_release(upstream.split(",")[0].strip())
    return release is not None and since is not None and release >= since


def not_carried_detail(patch: Patch, version: str) -> str:
    return (
        f"the series does not carry this patch for vLLM {version} "
        f"(Affects: {patch.affects})"
    )
