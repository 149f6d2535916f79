"""The compatibility matrix: every vLLM release against the bug and the fix.

For each release on the package index in a range: is it affected (the AST
verdict), by #51585 and, separately, by #53821 (a release can need one,
both or none), does the series apply or is it upstreamed, what would the overlay
do; and, for releases that install beside this venv's CPU torch (they pin
the same torch), the regression suite against a real install. Only the few
files the checks need are read out of each source distribution. Results are
cached per release under a key of everything that can decide a row: the
source files of the checkers themselves (the invariants, the overlay's
shape classifier and decision, the regression package, this module), the
series file and every patch, and the Python, torch, git and local vLLM
versions the row is computed with. A changed checker never serves a stale
row.

A suite cell states how many checks ran and could not run; the checks that
could not run are listed under the table with the reason.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import json
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import vllm_overlay
import vllm_patchkit.invariants
import vllm_patchkit.regression
import vllm_patchkit.series
from vllm_overlay.capture_shape import ROCM_ATTN, inspect_capture_tree
from vllm_patchkit.checkout import classify_tree, invariant_holds
from vllm_patchkit.doctor import AITER_FILE, fix_statuses
from vllm_patchkit.gitcmd import git_executable
from vllm_patchkit.index import release_versions, version_key
from vllm_patchkit.paths import cache_dir
from vllm_patchkit.regression.runner import TreeReport, run_scenarios
from vllm_patchkit.regression.verdict import AITER_FIX, CANNOT_JUDGE, FIXED, tally
from vllm_patchkit.release_installs import installed_release
from vllm_patchkit.releases import sdist_path
from vllm_patchkit.series import Series
from vllm_patchkit.versions import tree_release


@dataclass
class Row:
    version: str
    affected: bool
    shape: str
    series: str
    """A PatchState per patch, comma-joined."""
    overlay: str
    torch_pin: str | None
    suite: str
    """bug reproduced, passes, fails, cannot judge (why) or not run (why);
    with the counts of checks that ran and could not run."""
    checks: dict[str, Any] | None = None
    """The suite's counts (ran, passed, failed, not_run with the reasons)."""
    cached: bool = False
    fixes: dict[str, bool | None] | None = None
    """Per fix (#51585, #53821): does the release need it (None: cannot judge)."""


def select_versions(first: str, last: str) -> list[str]:
    versions = release_versions()
    if not versions:
        raise ValueError("the package index lists no vLLM source releases")
    last = versions[-1] if last == "latest" else last
    low, high = version_key(first), version_key(last)
    chosen = [v for v in versions if low <= version_key(v) <= high]
    if not chosen:
        raise ValueError(f"no vLLM release between {first} and {last} on the index")
    return chosen


def decider_files() -> list[Path]:
    """The source files whose code decides a row (hashed into the cache key).

    Found from the objects the row is computed with, so a checker that moves
    to another module is still covered.
    """
    modules = [
        sys.modules[__name__],
        vllm_patchkit.invariants,
        vllm_patchkit.series,
    ]
    files = [Path(inspect.getsourcefile(m) or "") for m in modules]
    for obj in (
        invariant_holds,
        fix_statuses,
        tree_release,
        inspect_capture_tree,
        installed_release,
    ):
        files.append(Path(inspect.getsourcefile(obj) or ""))
    files += sorted(Path(vllm_patchkit.regression.__file__ or "").parent.glob("*.py"))
    # The overlay's decision for each fix: every classifier and plan it uses.
    files += sorted(Path(vllm_overlay.__file__ or "").parent.glob("*.py"))
    return sorted({f.resolve() for f in files})


def cache_key(series: Series, with_suite: bool) -> str:
    digest = hashlib.sha256()

    def add(label: str, data: bytes) -> None:
        digest.update(f"{label}\0{len(data)}\0".encode())
        digest.update(data)

    if series.series_file.is_file():
        add("series", series.series_file.read_bytes())
    for patch in series.patches:
        add(f"patch {patch.path.name}", patch.path.read_bytes())
    for source in decider_files():
        add(f"source {source.parent.name}/{source.name}", source.read_bytes())
    add("suite", b"suite" if with_suite else b"no-suite")
    add("python", sys.version.encode())
    add("torch", _local_version("torch").encode())
    add("vllm", (_local_vllm() or "none").encode())
    add("git", _git_version().encode())
    return digest.hexdigest()[:16]


def _git_version() -> str:
    proc = subprocess.run(
        [git_executable(), "--version"], capture_output=True, text=True, check=False
    )
    return proc.stdout.strip()


def _local_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def _local_torch() -> str:
    try:
        return importlib.metadata.version("torch").split("+")[0]
    except importlib.metadata.PackageNotFoundError:
        return "none"


def _local_vllm() -> str | None:
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return None


def _extract(version: str, dest: Path, wanted: set[str]) -> str | None:
    """Write the wanted sdist members under ``dest``; return the torch pin."""
    top = f"vllm-{version}/"
    torch_pin = None
    with tarfile.open(sdist_path(version)) as tar:
        for member in tar:
            name = member.name.removeprefix(top)
            if name == "PKG-INFO":
                handle = tar.extractfile(member)
                for line in (handle.read().decode() if handle else "").splitlines():
                    if line.startswith("Requires-Dist: torch=="):
                        torch_pin = line.split("==", 1)[1].split(";")[0].strip()
            elif name in wanted and member.isfile():
                handle = tar.extractfile(member)
                target = dest / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(handle.read() if handle else b"")
    return torch_pin


def _suite(
    version: str, torch_pin: str | None, with_suite: bool
) -> tuple[str, dict[str, Any] | None]:
    if not with_suite:
        return "not run (--no-suite)", None
    if torch_pin != _local_torch():
        return f"not run (pins torch {torch_pin or 'unknown'})", None
    target = None if version == _local_vllm() else installed_release(version)
    return suite_cell(run_scenarios(target))


def suite_cell(run: TreeReport) -> tuple[str, dict[str, Any] | None]:
    """The suite column for one run: the verdict, then the counts."""
    if run.report is None:
        return f"cannot judge (the suite did not report, exit {run.returncode})", None
    counts = tally(run.report["checks"])
    ran = f"{counts.ran} ran"
    if counts.not_run:
        ran += f", {len(counts.not_run)} could not run"
    verdict = run.report.get("verdict")
    if run.bug_reproduced:
        cell = f"bug reproduced ({ran}: {counts.failed} failed)"
    elif verdict == FIXED:
        cell = f"passes ({ran})"
    elif verdict == CANNOT_JUDGE:
        cell = f"cannot judge ({ran}): {run.report.get('why', '')}"
    else:
        failed = [c["name"] for c in run.report["checks"] if c["status"] == "failed"]
        cell = f"fails ({ran}): " + ", ".join(failed)
    return cell, counts.to_json()


def analyse(version: str, series: Series, with_suite: bool) -> Row:
    # vllm/_version.py: the release, which decides what the series carries.
    wanted = {
        str(ROCM_ATTN),
        AITER_FILE,
        "vllm/_version.py",
        *(f for p in series.patches for f in p.files),
    }
    with tempfile.TemporaryDirectory(prefix=f"matrix-{version}-") as scratch:
        root = Path(scratch)
        torch_pin = _extract(version, root, wanted)
        (root / "vllm").mkdir(exist_ok=True)
        code = inspect_capture_tree(root)
        reports = classify_tree(root, series)
        series_state = ", ".join(r.status for r in reports)
        statuses = fix_statuses(root, series, reports)
        fixes = {f.fix: f.affected for f in statuses}
        overlay = ", ".join(f"{f.fix}: {f.overlay}" for f in statuses)
    suite, checks = _suite(version, torch_pin, with_suite)
    return Row(
        version=version,
        affected=code.affected,
        shape=str(code.shape),
        series=series_state,
        overlay=overlay,
        torch_pin=torch_pin,
        suite=suite,
        checks=checks,
        fixes=fixes,
    )


def build_matrix(
    series: Series,
    versions: list[str],
    with_suite: bool = True,
    progress: Callable[[int, int, Row], None] | None = None,
    refresh: bool = False,
) -> list[Row]:
    key = cache_key(series, with_suite)
    store = cache_dir() / "matrix" / key
    store.mkdir(parents=True, exist_ok=True)
    rows = []
    for index, version in enumerate(versions, 1):
        cached = store / f"{version}.json"
        if cached.is_file() and not refresh:
            row = Row(**{**json.loads(cached.read_text()), "cached": True})
        else:
            row = analyse(version, series, with_suite)
            cached.write_text(json.dumps(asdict(row)))
        rows.append(row)
        if progress:
            progress(index, len(versions), row)
    return rows


def markdown(rows: list[Row]) -> str:
    lines = [
        (
            "| vLLM | affected (#51585) | #53821 | capture code | series | overlay "
            "| suite (real install) |"
        ),
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    words = {True: "**yes**", False: "no", None: "cannot judge"}
    for row in rows:
        aiter = words[(row.fixes or {}).get(AITER_FIX)] if row.fixes else "?"
        lines.append(
            f"| {row.version} | {'**yes**' if row.affected else 'no'} | {aiter} "
            f"| {row.shape} | {row.series} | {row.overlay} | {row.suite} |"
        )
    notes = [
        f"- {row.version}: could not run: {item['name']}: {item['why']}"
        for row in rows
        for item in (row.checks or {}).get("not_run", [])
    ]
    if notes:
        lines += ["", "Checks that could not run:", "", *notes]
    return "\n".join(lines) + "\n"
