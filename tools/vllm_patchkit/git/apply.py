"""Apply the series to a vLLM git checkout as commits, all or nothing.

Each patch goes in with ``git am -3``; afterwards every patch's invariant
must hold, which catches a hunk that applied with fuzz in the wrong place.
Any failure (conflict, broken invariant, a hook, the disk, an exception,
SIGINT, SIGTERM or SIGHUP) puts HEAD, the branch, the index and the work
tree back where they were, and removes what the run left behind; a rollback
that did not get there says so and keeps its journal. A SIGKILL is cleaned
up by the next run when that is safe (see :mod:`vllm_patchkit.git.guard`). A
dirty or busy checkout, or a patch that would create a path that exists
(ignored or not), is refused before anything is touched.
"""

from __future__ import annotations

import enum
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from vllm_overlay.tree_files import read_regular
from vllm_patchkit.errors import RefusedError
from vllm_patchkit.git.carry import read_version
from vllm_patchkit.git.checkout import (
    BASE_REF,
    UNTRIED,
    PatchReport,
    PatchState,
    classify,
    classify_with_history,
    committer_env,
    open_checkout,
    refusal,
)
from vllm_patchkit.git.guard import CheckoutGuard, JournalAction
from vllm_patchkit.git.invariants import check_invariant
from vllm_patchkit.git.series import Patch, Series
from vllm_patchkit.gitcmd import Git


class Status(enum.StrEnum):
    APPLIED = "applied"
    ALREADY_APPLIED = "already-applied"
    UPSTREAMED = "upstreamed"
    NOT_CARRIED = "not-carried"
    """The series carries none of its patches for this tree's release."""
    CONFLICT = "conflict"
    REFUSED = "refused"
    ERROR = "error"


@dataclass
class ApplyResult:
    status: Status
    message: str
    head_before: str | None = None
    head_after: str | None = None
    patches: list[PatchReport] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """The patches the user skipped (``--skip``), by file name."""


_TO_APPLY = (PatchState.APPLIES, PatchState.CONFLICT)
MAX_CONFLICT_BYTES = 16 << 20
"""A conflicted file past this is not searched for conflict markers."""

_ENVIRONMENT_ERRORS = (
    "No space left on device",
    "Permission denied",
    "Read-only file system",
    "Disk quota exceeded",
    "Input/output error",
)


def apply_series(
    path: Path,
    series: Series,
    journal_action: JournalAction = JournalAction.AUTO,
    skip: frozenset[str] = frozenset(),
) -> ApplyResult:
    """Apply ``series`` but ``skip`` (``apply --skip``) to the checkout at
    ``path``. A refusal is a REFUSED result; a rollback that did not
    complete raises RollbackFailedError, an interrupt Interrupted."""
    notes: list[str] = []
    try:
        git = open_checkout(path)
        with CheckoutGuard(git, "apply", journal_action) as guard:
            notes = [guard.recovered] if guard.recovered else []
            head, branch = git.head_and_branch()
            reason = refusal(git, branch)
            if reason:
                return ApplyResult(Status.REFUSED, reason, notes=notes)
            result = _apply_locked(git, guard, series, head, branch, skip)
            result.notes[:0] = notes
            result.skipped = [p.name for p in series.patches if p.name in skip]
            return result
    except RefusedError as exc:
        return ApplyResult(Status.REFUSED, str(exc), notes=notes)


def paths_in_the_way(git: Git, patches: list[Patch]) -> list[str]:
    """Paths a patch creates that exist already (ignored or not), or whose
    parent exists as a file: git would overwrite them, a rollback delete them."""
    if not patches:
        return []
    found = []
    summary = git.run("apply", "--summary", *(str(p.path) for p in patches)).stdout
    for line in summary.splitlines():
        words = line.split()
        if words[:2] != ["create", "mode"] or len(words) < 4:
            continue
        name = line.split(None, 3)[3]
        creator = next((p.name for p in patches if name in p.files), patches[0].name)
        target = git.root / name
        blocked = [target, *target.parents]
        for candidate in blocked:
            if candidate == git.root:
                break
            exists = candidate.is_symlink() or candidate.exists()
            if exists and (candidate == target or not candidate.is_dir()):
                there = candidate.relative_to(git.root)
                found.append(f"{creator} creates {name}, but {there} exists")
                break
    return found


def _apply_locked(
    git: Git,
    guard: CheckoutGuard,
    series: Series,
    head: str,
    branch: str | None,
    skip: frozenset[str],
) -> ApplyResult:
    # A patch that is neither applied, upstreamed nor not-carried is not
    # tried on a scratch index first: git am tries it. Only a failure (or a
    # refusal) needs to know whether it applies, to tell a conflict (4) from
    # a hook, the disk or permissions (3); that is asked once the checkout
    # is back where it was, of the same state as before the run.
    reports, found = classify_with_history(git, series, try_apply=False, skip=skip)
    pending = [
        p for p, r in zip(series.patches, reports, strict=True) if r.status in _TO_APPLY
    ]
    upstreamed = [r.name for r in reports if r.status == PatchState.UPSTREAMED]
    version = read_version(git.root)
    skipped = _not_carried_note(
        reports, f"vLLM {version.version}" if version.trusted else "this tree"
    )
    if not pending:
        return _nothing_to_apply(reports, upstreamed, skipped, head)
    in_the_way = paths_in_the_way(git, pending)
    if in_the_way:
        return ApplyResult(
            Status.REFUSED,
            f"{git.root}: refusing: {'; '.join(in_the_way)} (ignored or not); move "
            "it away first; nothing was changed",
            head,
            head,
            classify(git, series, skip),
        )
    by_name = {r.name: r for r in reports}
    ids = [found.patch_ids[p.name] for p in pending]
    paths = sorted({f for p in pending for f in p.files})
    guard.begin(head, branch, ids, paths)
    env = committer_env(git)
    for number, patch in enumerate(pending, 1):
        report = by_name[patch.name]
        # git am's automatic maintenance once, after the last patch, as
        # after a `git am` of the whole series.
        failure = am_one(git, patch, report, env, maintenance=number == len(pending))
        if failure is None:
            continue
        where = guard.rollback()
        expected = _tried(git, series, reports, skip)
        status = Status.CONFLICT
        if _environment_failure(report, expected[patch.name]):
            report.status, status = expected[patch.name], Status.ERROR
            failure = (
                "git am failed although the patch applies here, so a hook, the "
                f"disk or permissions failed it: {report.detail}"
            )
        message = f"{patch.name}: {failure}; the checkout was restored to {where}"
        return ApplyResult(status, message, head, git.head(), reports)
    git.run("update-ref", BASE_REF, head)
    return ApplyResult(
        Status.APPLIED,
        f"applied {len(pending)} patch(es)"
        + (f"; upstream already carries {', '.join(upstreamed)}" if upstreamed else "")
        + skipped,
        head,
        git.head(),
        reports,
    )


def _tried(
    git: Git, series: Series, reports: list[PatchReport], skip: frozenset[str]
) -> dict[str, str]:
    """After a rollback: each patch's state as :func:`classify` says it (the
    reports of patches git am did not reach take it)."""
    tried = {r.name: r for r in classify(git, series, skip)}
    for index, report in enumerate(reports):
        if report.detail == UNTRIED:
            reports[index] = tried[report.name]
    return {name: r.status for name, r in tried.items()}


def _not_carried_note(reports: list[PatchReport], tree: str) -> str:
    names = [r.name for r in reports if r.status == PatchState.NOT_CARRIED]
    if not names:
        return ""
    return f"; not carried for {tree} (skipped): {', '.join(names)}"


def _nothing_to_apply(
    reports: list[PatchReport], upstreamed: list[str], skipped: str, head: str
) -> ApplyResult:
    """Every patch is applied, upstreamed or not carried: nothing changes.

    Upstreamed (exit 5) needs upstream to carry every patch the series
    carries for this release, and at least one; a release the series carries
    nothing for is not-carried (exit 0), whatever upstream did.
    """
    carried = [r for r in reports if r.status != PatchState.NOT_CARRIED]
    if not carried:
        status = Status.NOT_CARRIED
        message = (
            "the series carries none of its patches for this release; nothing to apply"
        )
    elif len(upstreamed) == len(carried):
        whole = (
            "the whole series"
            if len(carried) == len(reports)
            else "every patch the series carries for this release"
        )
        status = Status.UPSTREAMED
        message = f"upstream already carries {whole}; nothing to apply" + skipped
    else:
        status = Status.ALREADY_APPLIED
        also = f" (upstream carries {', '.join(upstreamed)})" if upstreamed else ""
        message = "the series is already applied" + also + skipped
    return ApplyResult(status, message, head, head, reports)


def _environment_failure(report: PatchReport, expected: str) -> bool:
    """A failed ``git am`` that is not the patch's fault: the patch applies
    here (classify said so and git left no conflict), or git names an I/O or
    permission error."""
    if report.detail.startswith("applied, but invariant"):
        return False
    if any(text in report.detail for text in _ENVIRONMENT_ERRORS):
        return True
    return expected == PatchState.APPLIES and not report.files


def am_one(
    git: Git,
    patch: Patch,
    report: PatchReport,
    env: dict[str, str] | None = None,
    *,
    maintenance: bool = True,
) -> str | None:
    """``git am -3`` one patch and check its invariant; the failure, if any,
    recorded in ``report`` and the am left for the caller to roll back."""
    # --keep-non-patch: plain `git am` strips every [...] group from the
    # subject, which would drop vLLM's [Bugfix][ROCm] prefixes.
    proc = git.run(
        *(() if maintenance else ("-c", "maintenance.auto=false")),
        "am",
        "-3",
        "--keep-non-patch",
        "--keep-cr",
        str(patch.path),
        check=False,
        env=committer_env(git) if env is None else env,
    )
    if proc.returncode != 0:
        return record_conflict(git, report, git_errors(proc) or "git am failed")
    report.status = PatchState.APPLIED
    report.detail = ""
    return invariant_failure(git, patch, report)


def invariant_failure(git: Git, patch: Patch, report: PatchReport) -> str | None:
    """After ``patch`` went in: its invariant recorded in ``report`` (a
    conflict where it does not hold); the failure, if any."""
    if patch.invariant is None:
        return None
    result = check_invariant(patch.invariant, git.root)
    if result.holds:
        report.detail = "invariant holds"
        return None
    report.status = PatchState.CONFLICT
    report.files = list(patch.files)
    report.detail = (
        f"applied, but invariant {patch.invariant} does not hold: {result.detail}"
    )
    return report.detail


def record_conflict(git: Git, report: PatchReport, detail: str) -> str:
    """A failed ``git am`` or cherry-pick recorded in ``report``, with the
    files and hunks git left in conflict; the failure message."""
    report.status = PatchState.CONFLICT
    report.files, report.hunks = conflict_location(git)
    report.detail = detail
    conflicts = f" (conflicts in {', '.join(report.files)})" if report.files else ""
    return f"does not apply: {detail}{conflicts}"


def git_errors(proc: subprocess.CompletedProcess[str]) -> str:
    """A failed git am's or cherry-pick's error lines, an I/O or permission
    error first when there is one."""
    lines = [line.strip() for line in (proc.stdout + proc.stderr).splitlines()]
    environment = [x for x in lines if any(t in x for t in _ENVIRONMENT_ERRORS)]
    errors = [
        x
        for x in lines
        if x.startswith(("error:", "fatal:", "CONFLICT", "Patch failed"))
        and x not in environment
    ]
    return "; ".join((environment + errors)[:4])


def conflict_location(git: Git) -> tuple[list[str], list[str]]:
    """Unmerged files and, in each, the line ranges of the conflict markers."""
    files = git.run(
        "diff", "--name-only", "--diff-filter=U", check=False
    ).stdout.split()
    hunks = []
    for name in files:
        start = None
        try:
            data = read_regular(git.root / name, MAX_CONFLICT_BYTES)
            lines = data.decode(errors="replace").splitlines()
        except OSError:  # not a regular file, or too large: no ranges
            continue
        for number, line in enumerate(lines, 1):
            if line.startswith("<<<<<<<"):
                start = number
            elif line.startswith(">>>>>>>") and start is not None:
                hunks.append(f"{name}:{start}-{number}")
                start = None
    return files, hunks
