"""Run every mutant through the regression suite; count the kills.

One fixed tree serves all mutants: each gets its own copy of the file it
mutates (its :class:`.file_mutants.Target`, which its fix declares: see
:mod:`.targets`) in a scratch directory and its own subprocess
(see :mod:`.worker`), at most two at a time. The unmutated file runs first
through the same path and must be judged fixed (every fix fixed), or nothing
after it means anything.

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

from vllm_patchkit.judge.mutation.file_mutants import FileMutant, Target
from vllm_patchkit.judge.mutation.targets import ALL_MUTANTS, TARGETS
from vllm_patchkit.judge.regression.verdict import (
    FAILED,
    FIXED,
    status_of,
    tally,
    tally_line,
)
from vllm_patchkit.trees.tree_process import TreeLauncher

MAX_JOBS = 2


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
    fixes: dict[str, str] = field(default_factory=dict)
    """Each fix's verdict in the suite's report (``fixed``, ...)."""


@dataclass
class MutationReport:
    tree: Path
    runs: list[MutantRun]
    seconds: float
    baselines: list[MutantRun]
    """One per way the mutants ran (forked, fresh interpreters)."""

    @property
    def baseline(self) -> MutantRun:
        return self.baselines[0]

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
    fail_fast: bool
    target: Target

    @property
    def module_file(self) -> Path:
        return self.directory / self.target.relpath

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


def _job(
    tree: Path,
    mutant: FileMutant,
    scratch: Path,
    fail_fast: bool,
    name: str | None = None,
) -> _Job:
    """A mutant's job: its file's source, mutated, written in its own
    directory beside the tree's files the target's AST check reads."""
    target = mutant.target
    source = mutant.make((tree / target.relpath).read_text())
    name = name or mutant.name
    job = _Job(name, mutant.description, scratch / name, fail_fast, target)
    job.module_file.parent.mkdir(parents=True)
    job.module_file.write_text(source)
    for relpath in target.partners:
        (job.directory / relpath).parent.mkdir(parents=True, exist_ok=True)
        (job.directory / relpath).write_text((tree / relpath).read_text())
    return job


def _result(job: _Job, seconds: float, problem: str | None = None) -> MutantRun:
    """What the job's report says; a run that proves nothing says why."""
    shape = job.target.shape(job.directory)  # "fixed": the AST check is fooled
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
    run.fixes = {fix: judged["verdict"] for fix, judged in report["fixes"].items()}
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
    mutants: Sequence[FileMutant] = ALL_MUTANTS,
    jobs: int = MAX_JOBS,
    fail_fast: bool = False,
    timeout: float = 300,
    fork: bool = True,
) -> MutationReport:
    """Run ``mutants`` of the fixes in ``tree`` (which must be fixed).

    ``fork``: the mutants of a target that can be left out of vLLM's import
    (:attr:`.file_mutants.Target.forks`) in processes forked from one that
    imported vLLM once (see :mod:`.zygote`); the others, and all of them
    when the warm-up cannot keep the modules out, each in a fresh
    interpreter. Each way runs the unmutated file of its first target first
    (the first of :data:`TARGETS` when there is no mutant), which must be
    judged fixed.
    """
    jobs = max(1, min(jobs, MAX_JOBS))
    launcher = TreeLauncher.of(tree)
    planned = list(mutants)
    start = time.monotonic()
    done: dict[str, MutantRun] = {}
    baselines: list[MutantRun] = []
    with tempfile.TemporaryDirectory(prefix="vllm-overlay-mutants-") as tmp:
        scratch = Path(tmp)
        work = [_job(tree, m, scratch, fail_fast) for m in planned]
        forked = [j for j in work if fork and j.target.forks]
        spawned = [j for j in work if j not in forked]
        ways = [(True, forked)] if forked or (fork and not work) else []
        ways += [(False, spawned)] if spawned or (not fork and not work) else []
        for forks, group in ways:
            target = _first_target(group)
            # The file as the tree has it, through the mutants' path: the
            # first way's is "baseline", a later one's names its target.
            unmutated = FileMutant("baseline", "the fixed method", target, lambda s: s)
            name = f"baseline-{target.key}" if baselines else "baseline"
            baseline = _job(tree, unmutated, scratch, fail_fast, name)
            runs = None
            if forks:
                runs = _fork_all(launcher, [baseline, *group], jobs, timeout)
            if runs is None:
                runs = _spawn_all(launcher, baseline, group, jobs, timeout)
            baselines.append(runs[0])
            if not _baseline_passed(runs[0]):
                first = runs[0]
                raise BaselineFailed(
                    f"the unmutated {target.relpath} does not pass: "
                    f"{first.problem or ''}{first.failed_checks} {first.fixes}"
                )
            done |= {r.name: r for r in runs[1:]}
    rest = [done[m.name] for m in planned]
    return MutationReport(tree, rest, time.monotonic() - start, baselines)


def _first_target(group: list[_Job]) -> Target:
    """The first target (in :data:`TARGETS` order) a group's jobs mutate;
    with none, the first target of all."""
    mutated = {job.target for job in group}
    return next((t for t in TARGETS if t in mutated), TARGETS[0])


def _spawn_all(
    launcher: TreeLauncher,
    baseline: _Job,
    group: list[_Job],
    jobs: int,
    timeout: float,
) -> list[MutantRun]:
    """The baseline, then (if it passed) each job, in fresh interpreters."""
    first = _spawn(launcher, baseline, timeout)
    if not _baseline_passed(first):
        return [first]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        spawn = functools.partial(_spawn, launcher, timeout=timeout)
        return [first, *pool.map(spawn, group)]


def _baseline_passed(run: MutantRun) -> bool:
    """Judged fixed: no check failed, the core checks ran (see _result) and
    every fix is fixed."""
    fixed = all(verdict == FIXED for verdict in run.fixes.values())
    return run.problem is None and not run.killed and fixed


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
