"""``vllm-patchkit doctor``: is this vLLM affected, and what would fix it?"""

from __future__ import annotations

import argparse
from pathlib import Path

from vllm_patchkit.commands.common import (
    add_command,
    add_json,
    emit_json,
    patch_lines,
)
from vllm_patchkit.judgement import Verdict
from vllm_patchkit.trees.runtime import INSTALLED_VLLM, require

TYPE_CHECKING = False
if TYPE_CHECKING:
    from vllm_patchkit.judge.doctor import Diagnosis


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "doctor",
        help="is a vLLM tree or the installed vLLM affected, and why?",
        description=(
            "Read a vLLM checkout, release tree or (with no PATH) the vLLM "
            "installed in this environment, without importing it, and report: "
            "the version, whether it carries the bug and why (file and line), "
            "the state of each patch, each fix separately (whether the tree "
            "needs it and the state of its patch, not-carried included), "
            "whether the overlay is installed and would activate, and the "
            "overlay's record of what it patches. Exit 1 when the tree needs "
            "any fix and is not protected (a tree given by path is protected "
            "only by patching it; the installed vLLM also by the overlay), "
            "whatever else cannot be read; else 3 when it cannot judge a fix "
            "(its file is missing, as in a fork that moved it, unless "
            "the tree's trusted version predates the bug; or it does not "
            "parse, as in a merge with conflict markers; or what the code does "
            "cannot be proven: an alias, a call receiving the offsets); 0 "
            "otherwise."
        ),
    )
    parser.add_argument(
        "path", nargs="?", type=Path, help="a vLLM tree (default: the installed vLLM)"
    )
    add_json(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    hint = "or name a vLLM tree: doctor PATH"
    if args.path is None:
        require("doctor", INSTALLED_VLLM, hint)
    from vllm_overlay.fixes import RECORD
    from vllm_overlay.record import render_record
    from vllm_patchkit.git.series import load_series
    from vllm_patchkit.judge.doctor import diagnose

    diagnosis = diagnose(load_series(args.patches), args.path)
    if args.json:
        emit_json(
            {
                **asdict(diagnosis),
                "judged": diagnosis.judged,
                "protected": diagnosis.protected,
            }
        )
    else:
        yes_no = {True: "yes", False: "no", None: Verdict.CANNOT_JUDGE.words}
        where = (
            f"{diagnosis.file}:{diagnosis.line}" if diagnosis.line else diagnosis.file
        )
        print(f"vLLM {diagnosis.vllm_version} at {diagnosis.target}")
        print(
            f"affected: {yes_no[diagnosis.affected]} ({diagnosis.shape}) at "
            f"{where} ({diagnosis.fix})"
        )
        print(f"  {diagnosis.reason}")
        print(f"  every fix: {diagnosis.summary}")
        print("patches:")
        print("\n".join(patch_lines(diagnosis.patches)))
        print("each fix:")
        for fix in diagnosis.fixes:
            print(
                f"  {fix.fix}: affected: {yes_no[fix.affected]}; "
                f"{fix.patch}: {fix.patch_state}; overlay: {fix.overlay}"
            )
            print(f"    {fix.detail}")
        print(
            f"overlay: entry point installed: {yes_no[diagnosis.overlay_entry_point]}; "
            f"would activate: {yes_no[diagnosis.overlay_would_activate]}"
        )
        print(f"  {diagnosis.overlay_decision}")
        print("what the overlay patches:")
        print("\n".join(f"  {line}" for line in render_record(RECORD)))
    return verdict(diagnosis).exit_code


def verdict(diagnosis: Diagnosis) -> Verdict:
    """The deciding fix's word (:func:`~vllm_overlay.diagnosis.deciding`:
    a needed, unprotected fix outranks one that cannot be read): cannot
    judge when it cannot be read; else fixed when every fix is protected."""
    if diagnosis.affected is None:
        return Verdict.CANNOT_JUDGE
    return Verdict.FIXED if diagnosis.protected else Verdict.NOT_FIXED
