"""The compatibility matrix: every vLLM release against the bug and the fix.

For each release on the package index in a range: is it affected (the AST
verdict), does the series apply or is it upstreamed, what would the overlay
do; and, for releases that install beside this venv's CPU torch (they pin
the same torch), the regression suite against a real install. Only the few
files the checks need are read out of each source distribution. Results are
cached per release under a key of everything that can change them (the
series, the checkers, the suite), so a second run only reads the cache.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import vllm_overlay.capture_shape
import vllm_patchkit.regression
from vllm_overlay.capture_shape import ROCM_ATTN, inspect_capture_tree
from vllm_overlay.install import action_for
from vllm_patchkit.checkout import PatchState, invariant_holds
from vllm_patchkit.gitcmd import Git, git_executable
from vllm_patchkit.index import release_versions, version_key
from vllm_patchkit.paths import cache_dir
from vllm_patchkit.regression.runner import run_scenarios
from vllm_patchkit.release_installs import installed_release
from vllm_patchkit.releases import sdist_path
from vllm_patchkit.series import Series


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
    """bug reproduced, passes, not run (why), or failed (why)."""
    cached: bool = False


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


def cache_key(series: Series, with_suite: bool) -> str:
    digest = hashlib.sha256()
    for patch in series.patches:
        digest.update(patch.path.read_bytes())
    # Every checker that decides a column: the shape classifier and the whole
    # regression package (scenarios, harness, verdicts).
    sources = [Path(vllm_overlay.capture_shape.__file__ or "")]
    sources += sorted(Path(vllm_patchkit.regression.__file__ or "").parent.glob("*.py"))
    for source in sources:
        digest.update(source.read_bytes())
    digest.update(b"suite" if with_suite else b"no-suite")
    digest.update(_local_torch().encode())
    return digest.hexdigest()[:16]


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


def _series_state(root: Path, series: Series) -> str:
    states = []
    for patch in series.patches:
        if invariant_holds(Git(root), patch):
            states.append(PatchState.UPSTREAMED)
            continue
        proc = subprocess.run(
            [git_executable(), "apply", "--check", str(patch.path)],
            cwd=root,
            capture_output=True,
            text=True,
        )
        states.append(
            PatchState.APPLIES if proc.returncode == 0 else PatchState.CONFLICT
        )
    return ", ".join(states)


def _suite(version: str, torch_pin: str | None, with_suite: bool) -> str:
    if not with_suite:
        return "not run (--no-suite)"
    if torch_pin != _local_torch():
        return f"not run (pins torch {torch_pin or 'unknown'})"
    target = None if version == _local_vllm() else installed_release(version)
    run = run_scenarios(target)
    if run.report is None:
        return "failed (no report; see --json log)"
    if run.bug_reproduced:
        return "bug reproduced"
    if run.fixed:
        return "passes"
    failed = [c["name"] for c in run.report["checks"] if not c["passed"]]
    return "fails: " + ", ".join(failed)


def analyse(version: str, series: Series, with_suite: bool) -> Row:
    wanted = {str(ROCM_ATTN), *(f for p in series.patches for f in p.files)}
    with tempfile.TemporaryDirectory(prefix=f"matrix-{version}-") as scratch:
        root = Path(scratch)
        torch_pin = _extract(version, root, wanted)
        (root / "vllm").mkdir(exist_ok=True)
        code = inspect_capture_tree(root)
        series_state = _series_state(root, series)
    return Row(
        version=version,
        affected=code.affected,
        shape=str(code.shape),
        series=series_state,
        overlay=str(action_for(code.shape)),
        torch_pin=torch_pin,
        suite=_suite(version, torch_pin, with_suite),
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
        "| vLLM | affected | capture code | series | overlay | suite (real install) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(
            f"| {row.version} | {'**yes**' if row.affected else 'no'} | {row.shape} "
            f"| {row.series} | {row.overlay} | {row.suite} |"
        )
    return "\n".join(lines) + "\n"
