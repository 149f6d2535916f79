"""Run each test file alone, in a fresh pytest process: does it pass there?

The main run puts many files into one worker process, in an order that the
random seed and the machine's load decide; a file that passes only after
another one set something up (an import, an environment variable, a cache
in memory) passes there by luck. Here each file gets an interpreter of its
own with nothing before it. Two files run at a time; suite reports are
shared through ``--reports-dir`` (the same code judges the same trees, so
what a report says does not depend on which process asked first).

Every file alone costs as much as the suite again, so CI runs one slice a
commit (``--slice K/N``: the K-th of N, dealt from the longest-first order so
that each slice has its share of long files); N commits in a row cover every
file. The files of the other slices are named as not run, never counted as
passed.

    python tools/ci/files_alone.py --reports-dir DIR [--slice K/N] [-j 2] \
        [PYTEST_ARG ...]

Prints one line per file that failed (with its log's tail), then
``files alone: N passed, N failed, N not run (other slices)``; exit 0 when
every file run passed (or collected no test), else 1. Extra arguments go to
every pytest run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NO_TESTS_COLLECTED = 5


@dataclass(frozen=True)
class FileRun:
    file: str
    returncode: int
    seconds: float
    log: Path

    @property
    def passed(self) -> bool:
        return self.returncode in (0, NO_TESTS_COLLECTED)


def test_files() -> list[str]:
    """Every test file, the suite's longest first (so that no long file is
    left to run alone at the end), then the rest by name."""
    sys.path.insert(0, str(ROOT))
    from tests.conftest import LONGEST_FIRST

    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    files = sorted(
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "tests").rglob("test_*.py")
    )
    return sorted(files, key=lambda file: rank.get(file, len(rank)))


def parse_slice(text: str) -> tuple[int, int]:
    """``K/N`` with 1 <= K <= N."""
    try:
        k, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not K/N: {text!r}") from None
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"not 1 <= K <= N: {text!r}")
    return k, n


def slice_files(files: list[str], k: int, n: int) -> list[str]:
    """The K-th of N slices, dealt like cards: every N-th file from the K-th."""
    return files[k - 1 :: n]


def run_file(file: str, extra: list[str], logs: Path) -> FileRun:
    log = logs / (file.replace("/", "__") + ".log")
    argv = [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:xdist"]
    started = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.run(
            [*argv, "-q", *extra, file],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    return FileRun(file, proc.returncode, time.monotonic() - started, log)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reports-dir", type=Path, required=True, metavar="DIR")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument(
        "--slice",
        type=parse_slice,
        default=(1, 1),
        metavar="K/N",
        help="run only the K-th of N slices of the files (default: all)",
    )
    args, extra = parser.parse_known_args(argv)
    every = test_files()
    k, n = args.slice
    files = slice_files(every, k, n)
    skipped = [file for file in every if file not in files]
    logs = Path(tempfile.mkdtemp(prefix="vllm-overlay-files-alone-"))
    # One token: pytest reads a separate value of a conftest option as a path
    # (and then never loads the conftest that defines the option).
    pytest_args = [f"--reports-dir={args.reports_dir}", *extra]
    print(
        f"files alone: slice {k}/{n}, {len(files)} of {len(every)} files, "
        f"{args.jobs} at a time; logs in {logs}"
    )
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        runs = list(pool.map(lambda f: run_file(f, pytest_args, logs), files))
    failed = [run for run in runs if not run.passed]
    for run in failed:
        tail = run.log.read_text(errors="replace").splitlines()[-25:]
        print(f"FAILED alone: {run.file} (exit {run.returncode}, {run.seconds:.0f} s)")
        print("\n".join(f"    {line}" for line in tail))
    slowest = sorted(runs, key=lambda run: -run.seconds)[:5]
    print("slowest: " + ", ".join(f"{r.file} {r.seconds:.0f} s" for r in slowest))
    if skipped:
        print("not run alone (other slices): " + ", ".join(skipped))
    print(
        f"files alone: {len(runs) - len(failed)} passed, {len(failed)} failed, "
        f"{len(skipped)} not run (other slices)"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
