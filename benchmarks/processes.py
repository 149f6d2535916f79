"""Time whole processes, the way a user waits for a command.

Shared by the benchmarks, with their options (:func:`arguments`). Each run
is one child process: its wall time, its CPU time and its peak resident
memory come from ``wait4``, so a command's git children (which it waits
for) count in its CPU time. A command is always measured paired with a
baseline in the same run, alternating, and compared by medians, so a loaded
machine slows both sides.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Sample:
    wall_s: float
    cpu_s: float
    max_rss_mib: float
    returncode: int


@dataclass
class Series:
    """Every sample of one command in one run."""

    name: str
    argv: list[str]
    ok: tuple[int, ...] = (0,)
    """Exit codes that mean the command did its job (doctor: 1 = affected)."""
    env: Mapping[str, str] | None = None
    """This command's environment, when it is not the run's."""
    samples: list[Sample] = field(default_factory=list)

    def median(self, what: str) -> float:
        return statistics.median(getattr(s, what) for s in self.samples)

    def summary(self) -> dict[str, object]:
        return {
            "argv": self.argv,
            "runs": len(self.samples),
            "wall_s": self.median("wall_s"),
            "cpu_s": self.median("cpu_s"),
            "max_rss_mib": max(s.max_rss_mib for s in self.samples),
            "returncodes": sorted({s.returncode for s in self.samples}),
        }


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    ok: Sequence[int] = (0,),
) -> Sample:
    """Run ``argv`` once, output discarded; raise if its exit code is not ``ok``."""
    start = time.perf_counter()
    child = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=None if env is None else dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert child.stderr is not None
    stderr = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    child.stderr.close()
    if child.returncode not in ok:
        raise RuntimeError(
            f"{' '.join(argv)} exited {child.returncode}:\n"
            + stderr.decode(errors="replace")[-2000:]
        )
    return Sample(
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        max_rss_mib=usage.ru_maxrss / 1024,
        returncode=child.returncode,
    )


def paired(
    baseline: Series,
    command: Series,
    repeat: int,
    *,
    before_each: Callable[[], None] | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """Alternate baseline and command ``repeat`` times (after one warm-up each)."""
    for round_ in range(repeat + 1):
        for series in (baseline, command):
            if before_each is not None:
                before_each()
            sample = run_process(
                series.argv, cwd=cwd, env=series.env or env, ok=series.ok
            )
            if round_:
                series.samples.append(sample)


def with_bytecode(env: Mapping[str, str], scratch: Path) -> dict[str, str]:
    """``env`` as a user's install runs: byte-code cached.

    pip compiles a wheel's modules when it installs them, and Python writes
    the byte-code of an editable checkout on first use; only a process with
    ``PYTHONDONTWRITEBYTECODE`` set (as this machine's environment and the
    test helpers have) compiles every module of the toolkit from source at
    every start, a cost no user pays. Byte-code goes to a scratch
    ``PYTHONPYCACHEPREFIX`` (nothing is written beside the sources); the
    warm-up round of :func:`paired` fills it, for baseline and command alike.
    """
    cached = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cached["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    return cached


def arguments(
    doc: str, *, repeat: int, release: bool = True
) -> argparse.ArgumentParser:
    """A benchmark's options: ``--repeat`` (``repeat`` rounds), ``--json`` and,
    on a release checkout, ``--version`` (0.28.0); the description is the
    first paragraph of the script's ``doc``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    if release:
        parser.add_argument("--version", default="0.28.0")
    parser.add_argument("--repeat", type=int, default=repeat)
    parser.add_argument("--json", action="store_true")
    return parser


def ratio(command: Series, baseline: Series, what: str = "wall_s") -> float:
    return command.median(what) / baseline.median(what)


def import_profile(
    argv: Sequence[str], env: Mapping[str, str]
) -> tuple[float, set[str]]:
    """One run under ``-X importtime``: total import time (ms) and the
    top-level packages it imported."""
    proc = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]],
        capture_output=True,
        text=True,
        env=dict(env),
        check=False,
    )
    total_us = 0
    packages = set()
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _, name = line.removeprefix("import time:").split("|")
        total_us += int(self_us)
        packages.add(name.strip().split(".")[0])
    return total_us / 1e3, packages
