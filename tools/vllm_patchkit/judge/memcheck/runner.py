"""Run a Python script under the checker (``python -m vllm_patchkit.judge.memcheck``).

The parent (``vllm-patchkit memcheck``) sets ``TRITON_INTERPRET=1`` and,
unless already set, ``CUDA_VISIBLE_DEVICES=""`` in this process's
environment, so they hold before the script imports Triton or vLLM (vLLM's
import shim disables Triton on a machine with no GPU driver otherwise).
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from typing import Any

from vllm_patchkit.errors import EXIT_FAILED, EXIT_REFUSED
from vllm_patchkit.judge.memcheck import REPORT_OPTION
from vllm_patchkit.judge.memcheck.checker import MemoryViolation, memcheck


def run(argv: list[str]) -> int:
    """Run ``argv[0]`` as ``__main__`` with ``argv`` as its ``sys.argv`` and
    its own directory first on ``sys.path``, as ``python SCRIPT`` would (not
    the directory ``-m`` put there)."""
    report = None
    if argv[:1] and argv[0].startswith(REPORT_OPTION):
        report, argv = argv[0].removeprefix(REPORT_OPTION), argv[1:]
        os.dup2(2, 1)  # --json: the parent's stdout is for its one object
    if not argv:
        usage = "usage: python -m vllm_patchkit.judge.memcheck SCRIPT [ARGS...]"
        print(usage, file=sys.stderr)
        return EXIT_REFUSED
    status, outcome = _checked(argv)
    if report is not None:
        with open(report, "w", encoding="utf-8") as stream:
            json.dump(outcome, stream)
    return status


def _checked(argv: list[str]) -> tuple[int, dict[str, Any]]:
    """The script run under the checker: its status, and what was checked."""
    saved, sys.argv = sys.argv, list(argv)
    saved_path = list(sys.path)
    sys.path[:1] = [os.path.dirname(os.path.abspath(argv[0]))]
    status = 0
    try:
        with memcheck() as stats:
            try:
                runpy.run_path(argv[0], run_name="__main__")
            except SystemExit as exc:
                code = exc.code
                status = code if isinstance(code, int) else int(code is not None)
    except MemoryViolation as exc:
        print(f"memcheck: {exc}", file=sys.stderr)
        return EXIT_FAILED, {"violation": str(exc)}
    finally:
        sys.argv = saved
        sys.path[:] = saved_path
    print(
        f"memcheck: no violation: {stats.launches} launches of "
        f"{len(stats.kernels)} kernels, {stats.accesses} memory operations, "
        f"{stats.lanes} addresses checked",
        file=sys.stderr,
    )
    return status, {
        "violation": None,
        "launches": stats.launches,
        "kernels": sorted(stats.kernels),
        "accesses": stats.accesses,
        "lanes": stats.lanes,
    }
