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
import sys
from pathlib import Path

from vllm_patchkit.errors import InputError
from vllm_patchkit.trees.runtime import TRITON_RUNTIME, require


def run(args: argparse.Namespace) -> int:
    """Exit status: the script's; 1 on a violation; 2 (InputError) without a script."""
    argv = list(args.script)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        raise InputError(
            "no script given: vllm-patchkit memcheck [--] SCRIPT [ARGS...]"
        )
    require("memcheck", TRITON_RUNTIME)
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


def add_parser(commands: argparse._SubParsersAction) -> None:
    """Register the subcommand on the toolkit's subparsers."""
    parser = commands.add_parser(
        "memcheck",
        help="run a Python script with every Triton load/store bounds-checked",
        description=(
            "Run SCRIPT with Triton kernels interpreted on the CPU and every "
            "load and store checked against the storages of the tensors passed "
            "to its launch. An out-of-bounds access stops the script before it "
            "happens, naming the kernel, the nearest argument and the offset."
        ),
    )
    parser.add_argument(
        "script",
        nargs=argparse.REMAINDER,
        metavar="[--] SCRIPT [ARGS...]",
        help="the script and its arguments",
    )
    parser.set_defaults(handler=run)
