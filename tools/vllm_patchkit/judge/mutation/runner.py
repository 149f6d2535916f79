"""Run every mutant through the regression suite; count the kills.

One fixed tree serves all mutants: each gets its own copy of the module it
mutates (``rocm_attn.py``, or ``rocm_aiter_unified_attn.py`` for the #53821
pair mutants of :mod:`.aiter_unified`) in a scratch directory and its own
subprocess (see :mod:`.worker`), at most two at a time. The unmutated
method runs first through the same path and must be judged fixed, or
nothing after it means anything.

A kill needs a behavioural check to fail: a run that reports no check, or
whose only non-passing checks could not run (a harness error, a builder
absent here), is "not judged". It is neither a kill nor a survivor, it
lowers the kill rate, and the tier fails on it.
"""

from __future__ import annotations

import functools
import json
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_overlay.aiter_shape import AITER_UNIFIED_ATTN as AITER_ATTN
from vllm_overlay.capture_shape import ROCM_ATTN, inspect_capture_source
from vllm_patchkit.git.invariants import rocm_aiter_unified_capture_keeps_offsets
from vllm_patchkit.judge.mutation.aiter_unified import (
    AITER_MODULE,
    PAIR_MUTANTS,
    PairMutant,
    mutate_pair,
)
from vllm_patchkit.judge.mutation.mutants import MUTANTS, Mutant, mutate
from vllm_patchkit.judge.regression.verdict import (
    FAILED,
    FIXED,
    status_of,
    tally,
    tally_line,
)
from vllm_patchkit.trees.tree_process import TreeLauncher

MAX_JOBS = 2

TIER_PAIR_MUTANTS: tuple[PairMutant, ...] = tuple(
    m for m in PAIR_MUTANTS if m.module == AITER_MODULE
)
"""The pair mutants of ROCM_AITER_UNIFIED_ATTN's module. The pair's three
ROCM_ATTN mutants are left out: they rewrite the method :data:`MUTANTS`
already covers, into the same source as ``none_zeroed``, ``both_zeroed``
and ``seq_lens_fill_dropped`` (tests/mutation checks the equality)."""
ALL_MUTANTS: tuple[Mutant | PairMutant, ...] = (*MUTANTS, *TIER_PAIR_MUTANTS)


@dataclass
class MutantRun:
    name: str
    description: str
    invariant_shape: str
    """What the AST invariant makes of the mutated method (``fixed`` = fooled)."""
    killed: bool
    """A behavioural check failed on this mutant."""
    failed_checks: list[str] = field(default_factory=list)
    seconds: float = 0.0
    problem: str | None = None
    """Why the run is not judged (no report, the mutant not imported, no
    check failed but some could not run)."""
    counts: dict[str, Any] = field(default_factory=dict)


@dataclass
class MutationReport:
    tree: Path
    baseline: MutantRun
    runs: list[MutantRun]
    seconds: float

    @property
    def valid(self) -> list[MutantRun]:
        return [r for r in self.runs if r.problem is None]

    @property
    def not_judged(self) -> list[MutantRun]:
        return [r for r in self.runs if r.problem is not None]

    @property
    def kill_rate(self) -> float:
        """Kills over every mutant: one not judged counts against it."""
        runs = self.runs
        return sum(r.killed for r in runs) / len(runs) if runs else 0.0

    @property
    def survivors(self) -> list[str]:
        return [r.name for r in self.valid if not r.killed]


class BaselineFailed(RuntimeError):
    """The unmutated fixed method does not pass: kills would mean nothing."""


@dataclass(frozen=True)
class _Job:
    name: str
    description: str
    directory: Path
    source: str
    fail_fast: bool
    relpath: Path = ROCM_ATTN
    """The module the job mutates, relative to the tree."""
    partner: str | None = None
    """For an AITER mutant: the tree's ``rocm_attn.py``, written beside it so
    the AST invariant of the pair can read both (only the mutant is loaded)."""

    @property
    def module_file(self) -> Path:
        return self.directory / self.relpath

    @property
    def output(self) -> Path:
        return self.directory / "report.json"

    @property
    def log(self) -> Path:
        return self.directory / "log.txt"

    @property
    def args(self) -> list[str]:
        return ["--output", str(self.output)] + (
            ["--fail-fast"] if self.fail_fast else []
        )

    def write(self) -> _Job:
        self.module_file.parent.mkdir(parents=True)
        self.module_file.write_text(self.source)
        if self.partner is not None:
            (self.directory / ROCM_ATTN).write_text(self.partner)
        return self

    def invariant_shape(self) -> str:
        """``fixed`` when the AST check is fooled (calls the mutant fixed)."""
        if self.relpath == AITER_ATTN:
            holds = rocm_aiter_unified_capture_keeps_offsets(self.directory).holds
            return "fixed" if holds else "not-fixed"
        return inspect_capture_source(self.source, self.module_file).shape.value


def _job(
    tree: Path, mutant: Mutant | PairMutant, scratch: Path, fail_fast: bool
) -> _Job:
    """A mutant's job: its module's source, mutated, in its own directory."""
    if isinstance(mutant, PairMutant):
        relpath = Path(*mutant.module.split(".")).with_suffix(".py")
        source = mutate_pair((tree / relpath).read_text(), mutant)
        description = mutant.mutant.description
    else:
        relpath, description = ROCM_ATTN, mutant.description
        source = mutate((tree / ROCM_ATTN).read_text(), mutant)
    partner = (tree / ROCM_ATTN).read_text() if relpath == AITER_ATTN else None
    name = mutant.name
    return _Job(name, description, scratch / name, source, fail_fast, relpath, partner)


def _result(job: _Job, seconds: float, problem: str | None = None) -> MutantRun:
    """What the job's report says; a run that proves nothing says why."""
    shape = job.invariant_shape()
    run = MutantRun(job.name, job.description, shape, False, seconds=seconds)
    if problem is None and not job.output.is_file():
        log = job.log.read_text() if job.log.is_file() else ""
        problem = f"no report: {log[-300:]}"
    if problem is not None:
        run.problem = problem
        return run
    report: dict[str, Any] = json.loads(job.output.read_text())
    if Path(report.get("module_file") or "") != job.module_file.resolve():
        run.problem = f"imported {report.get('module_file')}, not the mutant"
        return run
    checks = report["checks"]
    counts = tally(checks)
    run.counts = counts.to_json()
    run.failed_checks = [c["name"] for c in checks if status_of(c) == FAILED]
    run.killed = bool(run.failed_checks)
    verdict = report.get("verdict")
    if not run.killed and verdict != FIXED:
        run.problem = (
            f"not judged: no behavioural check failed, verdict {verdict}; "
            + tally_line(counts)
            + "".join(f"; {n}: {w}" for n, w in counts.not_run[:3])
        )
    return run


def _spawn(launcher: TreeLauncher, job: _Job, timeout: float) -> MutantRun:
    """One fresh interpreter for the job (the fallback; slow imports)."""
    command = [sys.executable, "-m", "vllm_patchkit.judge.mutation.worker"]
    command += [str(job.module_file), "--", *job.args]
    start = time.monotonic()
    done = launcher.run(command, cwd=job.directory, timeout_s=timeout, log=job.log)
    problem = "timed out" if done.timed_out else None
    return _result(job, time.monotonic() - start, problem)


def _fork_all(
    launcher: TreeLauncher, jobs: list[_Job], jobs_at_once: int, timeout: float
) -> list[MutantRun] | None:
    """All jobs forked from one warmed-up process; None if it cannot."""
    request = {
        "jobs": [
            {
                "name": j.name,
                "module_file": str(j.module_file),
                "args": j.args,
                "log": str(j.log),
            }
            for j in jobs
        ],
        "jobs_at_once": jobs_at_once,
        "timeout": timeout,
    }
    command = [sys.executable, "-m", "vllm_patchkit.judge.mutation.zygote"]
    limit = timeout * (len(jobs) + 1)
    cwd = jobs[0].directory.parent
    proc = launcher.run(command, cwd=cwd, timeout_s=limit, stdin=json.dumps(request))
    if proc.returncode is None:  # raised, as before: the zygote hung
        raise subprocess.TimeoutExpired(command, limit, proc.stdout, proc.stderr)
    if proc.returncode != 0:
        return None
    done = {r["name"]: r for r in json.loads(proc.stdout.strip().splitlines()[-1])}
    runs = []
    for job in jobs:
        if job.name not in done:
            runs.append(_result(job, 0.0, "not run (the baseline failed)"))
            continue
        result = done[job.name]
        killed_by_timeout = result["returncode"] == -signal.SIGKILL
        problem = "timed out" if killed_by_timeout else None
        runs.append(_result(job, result["seconds"], problem))
    return runs


def run_mutation(
    tree: Path,
    mutants: Sequence[Mutant | PairMutant] = ALL_MUTANTS,
    jobs: int = MAX_JOBS,
    fail_fast: bool = False,
    timeout: float = 300,
    fork: bool = True,
) -> MutationReport:
    """Run ``mutants`` of the fixed method in ``tree`` (which must be fixed).

    ``fork``: every mutant in a process forked from one that imported vLLM
    once (see :mod:`.zygote`); falls back to a fresh interpreter per mutant
    when the warm-up cannot keep ``rocm_attn`` out.
    """
    jobs = max(1, min(jobs, MAX_JOBS))
    launcher = TreeLauncher.of(tree)
    source = (tree / ROCM_ATTN).read_text()
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="vllm-overlay-mutants-") as tmp:
        scratch = Path(tmp)
        baseline = _Job(
            "baseline", "the fixed method", scratch / "baseline", source, fail_fast
        )
        work = [baseline.write()] + [
            _job(tree, m, scratch, fail_fast).write() for m in mutants
        ]
        runs = _fork_all(launcher, work, jobs, timeout) if fork else None
        if runs is None:
            first = _spawn(launcher, baseline, timeout)
            runs = [first]
            if _baseline_passed(first):
                with ThreadPoolExecutor(max_workers=jobs) as pool:
                    spawn = functools.partial(_spawn, launcher, timeout=timeout)
                    runs += list(pool.map(spawn, work[1:]))
        first, rest = runs[0], runs[1:]
        if not _baseline_passed(first):
            raise BaselineFailed(
                f"the unmutated method does not pass: {first.problem or ''}"
                f"{first.failed_checks}"
            )
    return MutationReport(tree, first, rest, time.monotonic() - start)


def _baseline_passed(run: MutantRun) -> bool:
    """Judged fixed: no check failed and the core checks ran (see _result)."""
    return run.problem is None and not run.killed


def format_report(report: MutationReport) -> str:
    rows = [("mutant", "AST invariant", "suite", "failing checks", "s")]
    for run in report.runs:
        if run.problem:
            verdict, detail = "NOT JUDGED", run.problem[:80]
        else:
            verdict = "killed" if run.killed else "SURVIVED"
            shown = ", ".join(run.failed_checks[:3])
            more = len(run.failed_checks) - 3
            detail = shown + (f" (+{more})" if more > 0 else "")
        invariant = {"fixed": "holds (fooled)", "unknown": "cannot judge"}.get(
            run.invariant_shape, "fails"
        )
        rows.append((run.name, invariant, verdict, detail, f"{run.seconds:.0f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
        + f"  {row[4]}"
        for row in rows
    ]
    killed = sum(r.killed for r in report.runs)
    lines.append(
        f"kill rate: {killed}/{len(report.runs)} = {report.kill_rate:.0%}"
        f"  (baseline passed in {report.baseline.seconds:.0f} s;"
        f" total {report.seconds:.0f} s)"
    )
    if report.survivors:
        lines.append(f"survivors (missing scenarios): {', '.join(report.survivors)}")
    if report.not_judged:
        names = ", ".join(r.name for r in report.not_judged)
        lines.append(f"NOT JUDGED (no behavioural check failed): {names}")
    return "\n".join(lines)
