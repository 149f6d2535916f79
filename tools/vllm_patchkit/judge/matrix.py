"""The compatibility matrix: every vLLM release judged on its own source tree.

Each release in the range is built as a release tree (:mod:`releases`, a
fixed commit id per release) and judged by running code on it, with the
runtime :mod:`tree_runtime` gives the tree (this venv's torch, the release's
missing pure-Python requirements beside it):

- ``static``: what reading the tree says (affected by each fix of the
  registry, each patch's state, the overlay's decision per fix, the torch the
  release pins);
- ``stock``: the regression suite on the stock tree (bug reproduced or not);
- ``series``: the suite on a scratch clone of the tree with the series
  applied by the toolkit's own :func:`apply_series` (the cached release tree
  is never touched; the applied clone is kept per release commit and series
  hash). Where the series carries nothing for the release, or changes no
  file under ``vllm/`` (the package the suite imports), the stock run is the
  same code and is reused, and the cell says so;
- ``overlay``: :func:`overlay_probe.probe_overlay`, every fix's core
  scenarios through vLLM's own plugin loading, without and with the
  overlay, each fix's part in the cell's text;
- ``audit``: harmful shared-state writes (:func:`audit.audit_tree`).

Every step's result is cached (:mod:`run_cache`, the one cache) per release
commit under a key of everything that decides it (:func:`decider_files`, the
series, the Python, torch and git versions): a changed decider never serves
a stale cell. A step that could not run says precisely why; nothing is
reported as a pass that did not run.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from types import ModuleType
from typing import Any

import vllm_overlay
import vllm_overlay.fixes
import vllm_patchkit.judge.regression
from vllm_overlay.diagnosis import deciding
from vllm_overlay.releases import ReleaseRange
from vllm_patchkit.errors import InputError
from vllm_patchkit.git.apply import Status, apply_series
from vllm_patchkit.git.checkout import classify_path, invariant_holds
from vllm_patchkit.git.series import Series
from vllm_patchkit.gitcmd import Git, git_executable
from vllm_patchkit.judge import audit, overlay_probe
from vllm_patchkit.judge.doctor import fix_statuses
from vllm_patchkit.judge.regression.runner import TreeReport, run_scenarios
from vllm_patchkit.judge.regression.verdict import NOT_CARRIED, set_apart
from vllm_patchkit.judge.verify import judge_tree
from vllm_patchkit.judgement import Verdict
from vllm_patchkit.paths import PACKAGE_DIR, cache_dir, relative_to_checkout
from vllm_patchkit.trees import tree_runtime
from vllm_patchkit.trees.index import release_versions
from vllm_patchkit.trees.releases import locked, release_tree, staged_dir
from vllm_patchkit.trees.requirement_files import metadata_requirements
from vllm_patchkit.trees.run_cache import CacheKey, RunCache
from vllm_patchkit.trees.versions import require_release

STEPS = ("static", "stock", "series", "overlay", "audit")
CANNOT_JUDGE = Verdict.CANNOT_JUDGE
CANNOT_RUN = "cannot run"
UNJUDGED = frozenset({CANNOT_JUDGE, CANNOT_RUN})
"""The cell statuses of a measured step that could not be judged (exit 3).
A cell says ``cannot judge`` in its text; its status is the verdict's value
(:meth:`Verdict.read` takes either spelling: the overlay probe's and the
audit's words, cells written before one vocabulary)."""
MEASURED = ("stock", "series", "overlay", "audit")
"""The steps that run code on the tree (``--no-suite`` skips them)."""

STEP_OWN: dict[str, ModuleType] = {"overlay": overlay_probe, "audit": audit}
"""The modules only one step runs: their code is in that step's cache key and
no other's, although this module imports them all."""


@dataclass
class Cell:
    """One measured step on one release."""

    status: str
    """stock/series: bug reproduced, passes, fails, cannot judge, cannot run;
    overlay: fixes, inert, fails, cannot judge; audit: harmful, none,
    cannot judge; any step: skipped (the user asked)."""
    text: str
    """The table cell: the verdict and what it rests on."""
    seconds: float = 0.0
    """What computing it took (kept with the cache entry)."""
    counts: dict[str, Any] | None = None
    """Checks that ran, passed, failed, and those that could not run (why)."""
    detail: dict[str, Any] = field(default_factory=dict)
    cached: bool = False
    transient: bool = False
    """The environment may have decided it (an exception, a child that gave
    no report, an apply that failed although the patch applies): never
    cached, so the next run measures again."""

    def __post_init__(self) -> None:
        if Verdict.read(self.status) is CANNOT_JUDGE:
            self.status = CANNOT_JUDGE
        # A cell reads the same from any checkout: a path inside this one
        # (the venv's torch in an error) is kept relative to it, so shards
        # merged elsewhere and the committed table render byte for byte.
        self.text = relative_to_checkout(self.text)
        if isinstance(self.detail.get("why"), str):
            self.detail["why"] = relative_to_checkout(self.detail["why"])


@dataclass
class Row:
    version: str
    commit: str
    """The release tree's commit (fixed per release)."""
    affected: bool | None
    fixes: dict[str, bool | None]
    """Per fix (its PR label): does the release need it (None: cannot judge)."""
    shape: str
    series: str
    """A PatchState per patch, comma-joined."""
    overlay_plan: str
    """What the overlay decides per fix, read from the code."""
    torch_pin: str | None
    """The torch the release pins (its PKG-INFO)."""
    runtime: dict[str, Any] | None
    """The torch and extra packages that ran it (tree_runtime), when known."""
    stock: Cell
    applied: Cell
    overlay: Cell
    audit: Cell
    static_seconds: float = 0.0
    static_cached: bool = False

    @property
    def cells(self) -> dict[str, Cell]:
        return {
            "stock": self.stock,
            "series": self.applied,
            "overlay": self.overlay,
            "audit": self.audit,
        }

    @property
    def cached(self) -> bool:
        """Nothing in the row was computed by this run."""
        return self.static_cached and all(
            c.cached for c in self.cells.values() if c.status != "skipped"
        )

    @property
    def cost(self) -> float:
        """Seconds computing this row took, cached steps at their first cost."""
        return self.static_seconds + sum(c.seconds for c in self.cells.values())

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["cached"] = self.cached
        data["seconds"] = round(self.cost, 1)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Row:
        """The row :meth:`to_json` wrote (``matrix.json``'s rows), to render
        again; the derived ``cached`` and ``seconds`` are computed anew."""
        names = {f.name for f in fields(cls)}
        cell_names = {f.name for f in fields(Cell)}
        values = {k: v for k, v in data.items() if k in names}
        for step in ("stock", "applied", "overlay", "audit"):
            cell = data[step]
            values[step] = Cell(**{k: v for k, v in cell.items() if k in cell_names})
        return cls(**values)


def unjudged_cells(rows: list[Row]) -> list[str]:
    """``VERSION step`` of every measured cell that could not be judged
    (cannot judge, cannot run); a step the user left out is not one."""
    return [
        f"{row.version} {name}"
        for row in rows
        for name, cell in row.cells.items()
        if cell.status in UNJUDGED
    ]


def select_versions(first: str, last: str) -> list[str]:
    versions = release_versions()
    if not versions:
        raise InputError("the package index lists no vLLM source releases")
    last = versions[-1] if last == "latest" else last
    span = ReleaseRange(require_release(first), require_release(last))
    chosen = [v for v in versions if require_release(v) in span]
    if not chosen:
        raise InputError(f"no vLLM release between {first} and {last} on the index")
    return chosen


# ---------------------------------------------------------------- cache key


_OURS = {
    "vllm_patchkit": PACKAGE_DIR,
    "vllm_overlay": Path(inspect.getsourcefile(vllm_overlay) or "").parent,
}
"""The project's packages, by the directory they are loaded from."""


def _package_files(source: Path) -> list[Path]:
    return [p for p in source.parent.rglob("*.py") if "__pycache__" not in p.parts]


def _module_file(name: str) -> Path | None:
    """The source file of project module ``name``; None for a name that is
    no module (``from package.module import function`` names both).

    Found on disk under its package's directory, never by importing: an
    import of ``a.b.c`` imports ``a.b``, and the regression suite's
    scenarios import torch (a second of every matrix start).
    """
    top, *rest = name.split(".")
    base = _OURS[top].joinpath(*rest)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def _imported(path: Path) -> frozenset[str]:
    """The project modules ``path`` imports, at any depth of its code (each
    step's closure asks again; the files do not change within a run)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return frozenset(n for n in names if n.split(".")[0] in _OURS)


def import_closure(
    seeds: list[Path], stop: frozenset[Path] = frozenset()
) -> list[Path]:
    """``seeds`` and every project module they import, transitively, but the
    files in ``stop`` (neither kept nor followed)."""
    seen: set[Path] = set()
    todo = [p.resolve() for p in seeds]
    while todo:
        path = todo.pop()
        if path in seen or path in stop or not path.is_file():
            continue
        seen.add(path)
        for name in _imported(path):
            found = _module_file(name)
            if found is not None:
                todo.append(found.resolve())
    return sorted(seen)


def _source(obj: Any) -> Path:
    return Path(inspect.getsourcefile(obj) or "")


def _own_files(module: ModuleType) -> list[Path]:
    """The files of a step's own module (a package: all of it)."""
    source = _source(module)
    return _package_files(source) if source.name == "__init__.py" else [source]


def decider_files(step: str) -> list[Path]:
    """The source files whose code decides ``step``'s cells (its cache key).

    Seeded from the objects the step is computed with, so a checker that
    moves to another module is still covered, then closed over the project
    modules they import; another step's own modules (:data:`STEP_OWN`) are
    not followed. Code that runs in a child process (the regression suite,
    the overlay vLLM loads, the probe and the audit) and the fix registry's
    modules are taken as whole packages, since no import statement leads to
    them.
    """
    seeds = [_source(o) for o in (sys.modules[__name__], release_tree, tree_runtime)]
    # The fix registry finds its modules by listing its package: every step
    # reads them (the verdict's per-fix checks, the doctor's columns).
    seeds += _package_files(_source(vllm_overlay.fixes))
    overlay = _package_files(_source(vllm_overlay))
    suite = [_source(run_scenarios), _source(judge_tree)]
    suite += _package_files(_source(vllm_patchkit.judge.regression))
    if step == "static":
        seeds += [_source(o) for o in (classify_path, invariant_holds, fix_statuses)]
        seeds += [_source(Series), *overlay]
    elif step in ("stock", "series"):
        seeds += suite
        if step == "series":
            seeds += [_source(apply_series), _source(classify_path)]
    elif step in STEP_OWN:
        seeds += _own_files(STEP_OWN[step])
        if step == "overlay":
            seeds += overlay
    else:
        raise ValueError(f"no matrix step {step!r}")
    others = [f for s, m in STEP_OWN.items() if s != step for f in _own_files(m)]
    return import_closure(seeds, frozenset(f.resolve() for f in others))


def series_hash(series: Series) -> str:
    digest = hashlib.sha256()
    if series.series_file.is_file():
        digest.update(series.series_file.read_bytes())
    for patch in series.patches:
        digest.update(f"\0{patch.path.name}\0".encode())
        digest.update(patch.path.read_bytes())
    return digest.hexdigest()[:16]


def cache_key(series: Series, step: str) -> str:
    """The code digest of one step's cells: its deciders, and the series
    where it decides the step (:class:`StepCache` adds the release and the
    environment)."""
    digest = hashlib.sha256()

    def add(label: str, data: bytes) -> None:
        digest.update(f"{label}\0{len(data)}\0".encode())
        digest.update(data)

    add("step", step.encode())
    if step in ("static", "stock", "series"):
        add("series", series_hash(series).encode())
    for source in decider_files(step):
        add(f"source {source.parent.name}/{source.name}", source.read_bytes())
    return digest.hexdigest()[:16]


def environment() -> dict[str, str]:
    """The Python, torch and git versions every cache key holds (in order)."""
    git = subprocess.run(
        [git_executable(), "--version"], capture_output=True, text=True, check=False
    )
    return {
        "python": sys.version,
        "torch": tree_runtime.venv_version("torch") or "none",
        "git": git.stdout.strip(),
    }


def code_digest(series: Series) -> str:
    """Every step's code digest (its deciders, and the series where it
    decides the step), the code half of the cache keys: rows from runs of
    different code are never put in one table."""
    keys = {step: cache_key(series, step) for step in STEPS}
    return hashlib.sha256(json.dumps(keys).encode()).hexdigest()[:16]


# ---------------------------------------------------------------- steps


def suite_cell(tree: Path, series: Series, run: TreeReport) -> Cell:
    """A suite run as a cell: ``test``'s verdict on the tree
    (:func:`vllm_patchkit.judge.verify.judge_tree`, the suite alone), then the
    counts it rests on. A fix the series does not carry for the release is
    reported beside the verdict and decides nothing."""
    runtime = run.runtime.to_json() if run.runtime is not None else None
    if run.report is None:
        tail = " ".join(run.log.strip().splitlines()[-2:])[-300:]
        return Cell(
            CANNOT_JUDGE,
            f"{CANNOT_JUDGE.words}: the suite did not report (exit "
            f"{run.returncode}): {tail}",
            detail={"runtime": runtime},
            transient=True,
        )
    judged = judge_tree(tree, series, run, upstream_test=False)
    judgement = judged.judgement()
    verdict, why = judgement.verdict, judgement.why
    counts = judged.tally  # the checks of the fixes carried here
    ran = f"{counts.ran} ran"
    if counts.not_run:
        ran += f", {len(counts.not_run)} could not run"
    fixes = run.report.get("fixes") or {}
    skipped = judged.not_counted
    detail = {"verdict": verdict, "suite_verdict": run.report.get("verdict")}
    detail |= {"fixes": fixes, "not_counted": skipped}
    detail["runtime"] = run.report.get("runtime") or runtime
    if judgement.bug_reproduced:
        status = "bug reproduced"
        bugs = ", ".join(judged.bug_reproduced)
        text = f"bug reproduced ({ran}: {counts.failed} failed: {bugs})"
    elif verdict is Verdict.NOT_FIXED:
        status, text = "fails", f"fails ({ran}): {why}"
    elif verdict is Verdict.FIXED:
        status, text = "passes", f"passes ({ran})"
    else:
        status, text = CANNOT_JUDGE, f"{verdict.words} ({ran}): {why}"
    for fix, n in set_apart(run.report["checks"], skipped).items():
        text += f"; {fix} {NOT_CARRIED} ({skipped[fix]}): {n} checks, not counted"
    return Cell(status, text, counts=counts.to_json(), detail=detail)


def _cannot_run(exc: BaseException, seconds: float) -> Cell:
    """A step that could not happen: the error's own words (exit 3 semantics)."""
    name = type(exc).__name__
    status = CANNOT_RUN if name == "RuntimeUnavailable" else CANNOT_JUDGE
    words = CANNOT_JUDGE.words if status is CANNOT_JUDGE else status
    text = f"{words}: {exc}"
    return Cell(status, text, seconds, detail={"error": name}, transient=True)


def _timed(step: Callable[[], Cell]) -> Cell:
    start = time.perf_counter()
    try:
        cell = step()
    except subprocess.TimeoutExpired as exc:
        return _cannot_run(
            RuntimeError(f"timed out after {exc.timeout:.0f} s"),
            time.perf_counter() - start,
        )
    except Exception as exc:  # noqa: BLE001 - every failure becomes its cell
        return _cannot_run(exc, time.perf_counter() - start)
    cell.seconds = round(time.perf_counter() - start, 1)
    return cell


def run_suite(tree: Path, series: Series) -> Cell:
    return _timed(lambda: suite_cell(tree, series, run_scenarios(tree)))


def applied_tree(
    version: str, commit: str, tree: Path, series: Series
) -> tuple[Path, dict[str, Any]]:
    """A clone of ``tree`` (release ``commit``) with the series applied, kept
    per (release commit, series hash); the apply outcome, recorded beside it.
    The release tree itself is only read. A transient outcome is not
    recorded and its clone not kept, so the next run applies again."""
    name = f"vllm-{version}-{commit[:12]}-{series_hash(series)}"
    dest = cache_dir() / "matrix-applied" / name
    record = dest.parent / f"{name}.json"
    with locked(f"matrix-applied-{name}"):
        if (dest / ".git").is_dir() and record.is_file():
            kept = json.loads(record.read_text())
            # An older version kept transient outcomes too: never trust one.
            if kept["status"] not in _TRANSIENT_APPLY:
                return dest, kept
        record.unlink(missing_ok=True)
        with staged_dir(dest, f".{name}-") as staging:
            Git(staging.parent).run(
                "clone", "--quiet", "--local", str(tree), str(staging)
            )
            result = apply_series(staging, series)
        files = {p.name: list(p.files) for p in series.patches}
        outcome = {
            "status": str(result.status),
            "message": result.message,
            "applied": [
                {
                    "name": r.name,
                    "status": str(r.status),
                    "files": files.get(r.name, []),
                }
                for r in result.patches
            ],
        }
        if result.status in _TRANSIENT_APPLY:
            shutil.rmtree(dest)
        else:
            record.write_text(json.dumps(outcome))
        return dest, outcome


_TRANSIENT_APPLY = (Status.ERROR, Status.REFUSED)
"""Apply outcomes the environment decided (a hook, the disk, permissions, a
busy clone): the clone and its record are not kept."""


def run_series(
    version: str, commit: str, tree: Path, series: Series, stock: Cell
) -> Cell:
    """The suite with the series applied, or the stock run where it is the
    same code."""

    def step() -> Cell:
        target, outcome = applied_tree(version, commit, tree, series)
        status = outcome["status"]
        if status in (Status.NOT_CARRIED, Status.UPSTREAMED):
            why = f"series {status}: nothing to apply, stock run reused"
            return _reuse(stock, why, outcome)
        if status in _TRANSIENT_APPLY:
            return Cell(
                CANNOT_RUN,
                f"cannot run: the series apply failed in this environment "
                f"({status}): {outcome['message']}",
                detail={"apply": outcome},
                transient=True,
            )
        if status != Status.APPLIED:
            return Cell(
                "does not apply",
                f"series does not apply ({status}): {outcome['message']}",
                detail={"apply": outcome},
            )
        changed = sorted(
            f
            for item in outcome["applied"]
            if item["status"] == "applied"
            for f in item["files"]
        )
        if not any(f.startswith("vllm/") for f in changed):
            why = (
                f"series adds only {', '.join(changed)}: the suite imports the "
                "stock vllm/, stock run reused"
            )
            return _reuse(stock, why, outcome)
        cell = suite_cell(target, series, run_scenarios(target))
        cell.detail["apply"] = outcome
        return cell

    return _timed(step)


def _reuse(stock: Cell, why: str, outcome: dict[str, Any]) -> Cell:
    return Cell(
        stock.status,
        f"{stock.text} [{why}]",
        counts=stock.counts,
        detail={**stock.detail, "apply": outcome, "reused": "stock", "why": why},
    )


def run_overlay(tree: Path) -> Cell:
    def step() -> Cell:
        result = overlay_probe.probe_overlay(tree)
        text = f"{result.status}: without {result.without}, with {result.with_overlay}"
        if result.installed:
            text += f" (installed {', '.join(result.installed)})"
        if result.parts:
            text += f"; {result.parts_line()}"
        if result.verdict is not Verdict.FIXED and result.why:
            text += f": {result.why}"
        data = result.to_json()
        data["log"] = data.get("log", [])[:8]
        if result.verdict is CANNOT_JUDGE:
            # A probe run that gave no report, or a runtime that could not
            # be given: the environment's doing as much as the tree's.
            return Cell(CANNOT_JUDGE, text, detail=data, transient=True)
        return Cell(result.status, text, detail=data)

    return _timed(step)


def run_audit(tree: Path) -> Cell:
    def step() -> Cell:
        report = audit.audit_tree(tree)
        data = report.to_json()
        # The run's own list is long; keep the checks that could not run.
        not_run = [c.to_json() for c in report.could_not_run]
        data["checks"]["list"] = not_run
        checks = report.counts()
        counts = {k: checks[k] for k in ("ran", "passed", "failed")}
        counts["not_run"] = not_run
        kinds = data["counts"]
        rest = ", ".join(f"{n} {k}" for k, n in kinds.items() if k != "harmful" and n)
        ran = f"{checks['ran']} checks ran"
        if not_run:
            ran += f", {len(not_run)} could not run"
        harmful = [f for f in report.sorted_findings() if f.kind == "harmful"]
        where = "; ".join(
            f"{f.field} in {f.method} ({Path(f.file).name}:{f.line})" for f in harmful
        )
        if harmful:
            status, text = "harmful", f"{len(harmful)} harmful: {where}"
        elif report.judgement is CANNOT_JUDGE:
            names = ", ".join(c["name"] for c in not_run[:3])
            status = CANNOT_JUDGE
            text = f"{CANNOT_JUDGE.words}: none found, but {names} could not run"
        else:
            status, text = "none", "none"
        text += f" ({ran}{'; ' + rest if rest else ''})"
        return Cell(status, text, counts=counts, detail=data)

    return _timed(step)


# ---------------------------------------------------------------- rows


def static_facts(tree: Path, series: Series) -> dict[str, Any]:
    reports = classify_path(tree, series)
    # A release's row, not this shell's settings: the cell is cached for
    # every later sweep, whose environment may differ.
    statuses = fix_statuses(tree, series, reports, configured=False)
    decides = deciding(statuses)
    pins = metadata_requirements(tree / "PKG-INFO")  # the sdist's
    return {
        "affected": decides.affected,
        "fixes": {f.fix: f.affected for f in statuses},
        "shape": decides.shape,
        "series": ", ".join(r.status for r in reports),
        "overlay_plan": ", ".join(f"{f.fix}: {f.overlay}" for f in statuses),
        "torch_pin": tree_runtime.pinned_version("torch", pins),
    }


class StepCache:
    """Cells per (step, release commit), in the one cache
    (:mod:`~vllm_patchkit.trees.run_cache`) under the matrix's directory."""

    def __init__(self, series: Series, refresh: bool = False):
        self.keys = {step: cache_key(series, step) for step in STEPS}
        self.environment = environment()
        self.cache = RunCache(cache_dir() / "matrix", refresh=refresh)

    def get(
        self, version: str, commit: str, step: str, compute: Callable[[], Any]
    ) -> tuple[Any, bool]:
        key = CacheKey(step, f"{version}-{commit}", self.keys[step], self.environment)

        def measure() -> tuple[Any, bool]:
            value = compute()
            # A transient cell is the environment's doing: measured again next run.
            return value, not (isinstance(value, dict) and value.get("transient"))

        return self.cache.get(key, measure)


def analyse(
    index: int,
    version: str,
    series: Series,
    cache: StepCache,
    steps: tuple[str, ...] = MEASURED,
    progress: Callable[[int, str, str], None] | None = None,
) -> Row:
    say = progress or (lambda *_: None)
    say(index, version, "release tree")
    tree = release_tree(version)
    commit = Git(tree).run("rev-parse", "HEAD").stdout.strip()

    def static() -> dict[str, Any]:
        start = time.perf_counter()
        facts = static_facts(tree, series)
        facts["static_seconds"] = round(time.perf_counter() - start, 1)
        return facts

    facts, static_cached = cache.get(version, commit, "static", static)

    left_out = f"not in --steps {','.join(steps)}" if steps else "--no-suite"

    def measured(step: str, compute: Callable[[], Cell]) -> Cell:
        if step not in steps:
            return Cell("skipped", f"skipped ({left_out})")
        say(index, version, f"{step} ...")
        data, hit = cache.get(version, commit, step, lambda: asdict(compute()))
        cell = Cell(**{**data, "cached": hit})
        took = "cached" if hit else f"{cell.seconds:.1f} s"
        say(index, version, f"{step}: {cell.text[:100]} ({took})")
        return cell

    stock = measured("stock", lambda: run_suite(tree, series))
    # Keyword arguments are evaluated in order: the steps run (and report) in it.
    return Row(
        version=version,
        commit=commit,
        **facts,
        runtime=stock.detail.get("runtime"),
        stock=stock,
        applied=measured(
            "series", lambda: run_series(version, commit, tree, series, stock)
        ),
        overlay=measured("overlay", lambda: run_overlay(tree)),
        audit=measured("audit", lambda: run_audit(tree)),
        static_cached=static_cached,
    )


def build_matrix(
    series: Series,
    versions: list[str],
    steps: tuple[str, ...] = MEASURED,
    progress: Callable[[int, str, str], None] | None = None,
    refresh: bool = False,
    jobs: int = 1,
) -> list[Row]:
    """One row per release, ``jobs`` releases at a time, in release order."""
    cache = StepCache(series, refresh)

    def row(index: int, version: str) -> Row:
        return analyse(index, version, series, cache, steps, progress)

    numbers = range(1, len(versions) + 1)
    if jobs <= 1:
        return list(map(row, numbers, versions))
    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        return list(pool.map(row, numbers, versions))
    finally:
        # An interrupt or a failed release: start no further release (the
        # ones running finish their step; what finished stays cached).
        pool.shutdown(wait=False, cancel_futures=True)
