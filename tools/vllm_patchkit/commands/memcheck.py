"""The ``vllm-patchkit memcheck [--] SCRIPT [ARGS...]`` subcommand.

The script runs in a child interpreter so that ``TRITON_INTERPRET=1`` (and
``CUDA_VISIBLE_DEVICES=""`` unless set) are in its environment before it
imports anything: Triton decides at import time whether kernels are compiled
or interpreted, and only interpreted kernels can be checked. It starts through
the one launcher (:class:`~vllm_patchkit.trees.tree_process.TreeLauncher`, the
user's devices kept), in a group of its own that is killed with it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from vllm_patchkit.commands.common import add_json, emit_json
from vllm_patchkit.errors import InputError
from vllm_patchkit.judge.memcheck import REPORT_OPTION
from vllm_patchkit.trees.runtime import TRITON_RUNTIME, require


def check_script(name: str) -> None:
    """Refuse (exit 2) a script Python could not run, before a child starts:
    the child's traceback is no answer to a typo."""
    path = Path(name)
    if not path.exists():
        raise InputError(f"memcheck: {name}: no such file")
    if path.is_dir() and not (path / "__main__.py").is_file():
        raise InputError(f"memcheck: {name}: a directory without __main__.py")
    if not os.access(path, os.R_OK):
        raise InputError(f"memcheck: {name}: not readable")


def run(args: argparse.Namespace) -> int:
    """Exit status: the script's; 1 on a violation; 2 (InputError) without a
    script, or with one that is missing or unreadable."""
    argv = list(args.script)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        raise InputError(
            "no script given: vllm-patchkit memcheck [--] SCRIPT [ARGS...]"
        )
    check_script(argv[0])
    require("memcheck", TRITON_RUNTIME)
    if not args.json:
        return _child(argv)
    with tempfile.TemporaryDirectory(prefix="vllm-patchkit-memcheck-") as scratch:
        report = Path(scratch) / "report.json"
        code = _child([f"{REPORT_OPTION}{report}", *argv])
        emit_json(_outcome(argv, code, report))
    return code


def _child(argv: list[str]) -> int:
    from vllm_patchkit.trees.tree_process import (
        TreeLauncher,  # here: start-up imports us
    )

    command = [sys.executable, "-m", "vllm_patchkit.judge.memcheck", *argv]
    done = TreeLauncher(user_devices=True).run(
        command,
        cwd=Path.cwd(),
        timeout_s=None,
        inherit_stdio=True,
        TRITON_INTERPRET="1",
    )
    assert done.returncode is not None  # no timeout: it ran to its end
    return done.returncode


def _outcome(argv: list[str], code: int, report: Path) -> dict[str, Any]:
    """The one JSON object: the verdict word, the script's exit status, and
    what the checker counted (none when the child left no report)."""
    try:
        data = json.loads(report.read_text())
    except (OSError, ValueError):
        data = None
    if data is None:
        status = "error"
    elif data.get("violation"):
        status = "violation"
    else:
        status = "no-violation"
    return {
        "status": status,
        "script": argv[0],
        "args": argv[1:],
        "exit_code": code,
        **(data or {}),
    }


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "memcheck",
        help="run a Python script with every Triton load/store bounds-checked",
        description=(
            "Run SCRIPT with Triton kernels interpreted on the CPU and every "
            "load and store checked against the storages of the tensors passed "
            "to its launch. An out-of-bounds access stops the script before it "
            "happens, naming the kernel, the nearest argument and the offset. "
            "Exits with the script's status, 1 on a violation, 2 when SCRIPT is "
            "missing or unreadable (before anything runs). With --json (before "
            "SCRIPT) the script's own output goes to stderr and stdout gets one "
            "object: status (violation, no-violation, error: the checker left "
            "no report), the script and its exit status, the violation or the "
            "launches, kernels and memory operations checked."
        ),
    )
    parser.add_argument(
        "script",
        nargs=argparse.REMAINDER,
        metavar="[--] SCRIPT [ARGS...]",
        help="the script and its arguments",
    )
    add_json(parser)
    parser.set_defaults(handler=run)
