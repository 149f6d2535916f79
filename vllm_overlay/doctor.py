"""``python -m vllm_overlay``: is this vLLM affected, and is the overlay on?

Each fix is reported on its own (a vLLM can need one, all or none). By
default it loads vLLM's general plugins exactly as vLLM does at start-up and
then imports each module an armed fix patches, to confirm the fix is really
on vLLM's loaded code. ``--quick`` answers from the source alone (no vLLM
import), judging by the same rule: a needed fix is on when the overlay
would install it as vLLM starts here. Exit 1 when any fix is needed and
not on, or cannot be judged. Both end with the
overlay's record: what it patches, why, how, and when that goes. The
top-level verdict fields of ``--json`` are over every fix (``affected``
is the word of the fix that decides, as ``vllm-patchkit doctor`` gives it);
``fixes`` holds each fix's.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import sys
from contextlib import nullcontext
from typing import Any

from vllm_overlay import __version__, plugin
from vllm_overlay.diagnosis import Finding, deciding
from vllm_overlay.entry_points import ENTRY_POINT_GROUP, entry_point_registered
from vllm_overlay.fixes import (
    RECORD,
    assess_installed,
    by_name,
    disable_setting,
    on_vllm,
)
from vllm_overlay.installed import vllm_version
from vllm_overlay.kernel_switch import KERNEL_ENV, caller_module
from vllm_overlay.record import render_record
from vllm_overlay.settings import (
    DISABLE_ENV,
    STRICT_ENV,
    allowed_by_vllm_plugins,
    env_flag,
)
from vllm_overlay.state import Action, InstallState


def fix_report(finding: Finding, state: InstallState, disabled: bool) -> dict[str, Any]:
    """One fix's part of the report (before loading vLLM's plugins)."""
    target = by_name(finding.name).record
    plan = state.plan
    return {
        "name": finding.name,
        "target": target.target,
        "related": [item.split(":")[0] for item in target.related],
        "affected": finding.affected,
        "shape": finding.shape if state.code else None,
        "reason": finding.detail,
        "decision": finding.reason,
        "file": finding.file or None,
        "line": finding.line,
        "judged": finding.affected is not None,
        "would_do": str(finding.action),
        "removes": getattr(plan, "removes", None),  # a plan may remove none
        "disabled": disabled,
        "status": None,
        "active": None,
        "on_vllm": None,
        "covers": list(state.covered),
        "problems": []
        if finding.affected is not None
        else [f"cannot judge: {finding.reason}"],
        "protected": None,
    }


def diagnose(load_plugins: bool = True) -> dict[str, Any]:
    disabled, unknown = disable_setting()
    registered = entry_point_registered()
    states = assess_installed()
    findings = [Finding.of(s, s.vllm_version, registered) for s in states]
    report: dict[str, Any] = {
        "vllm_version": vllm_version(),
        "entry_point_registered": registered,
        "allowed_by_vllm_plugins": allowed_by_vllm_plugins(),
        # True when every fix is off: what the fixes' own entries say.
        "disabled": disabled == {target.name for target in RECORD},
        "disabled_fixes": sorted(disabled),
        "disabled_unknown": unknown,
        "strict": env_flag(STRICT_ENV),
        "kernel_opt_in": env_flag(KERNEL_ENV),
        "kernel": None,
        "fixes": [
            fix_report(f, s, f.name in disabled)
            for f, s in zip(findings, states, strict=True)
        ],
        "record": [target.as_dict() for target in RECORD],
    }
    if load_plugins:
        _load_plugins(report, findings)
    # Each fix's protection, and the word of the fix that ``deciding`` picks.
    for entry, finding in zip(report["fixes"], findings, strict=True):
        entry["protected"] = finding.protected
    report["affected"] = deciding(findings).affected
    report["judged"] = all(f.affected is not None for f in findings)
    report["needed"] = [f.name for f in findings if f.affected is not False]
    report["not_protected"] = [f.name for f in findings if not f.protected]
    report["problems"] = [p for e in report["fixes"] for p in e["problems"]]
    return report


def _load_plugins(report: dict[str, Any], findings: list[Finding]) -> None:
    """Load vLLM's plugins as vLLM does, import each armed fix's module, and
    record each fix's state in this process."""
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    states = plugin.current_states()
    fixes = report["fixes"]
    for entry in fixes:
        state = states.get(entry["name"])
        if state and state.action is Action.INSTALLED:
            # Import the module as vLLM would: that is what installs the fix.
            entry["on_vllm"] = on_vllm(entry["name"], load=True)
    for entry, finding in zip(fixes, findings, strict=True):
        state = states.get(entry["name"])
        entry["status"] = state.status if state else "not loaded"
        entry["active"] = finding.active = entry["status"] == "installed"
        if state:
            entry["problems"] += list(state.problems)
    if report["kernel_opt_in"] and states:
        # The kernel rides on a fix (its ``also``): the caller's import swaps it.
        importlib.import_module(caller_module())
        kernels = {state.kernel for state in states.values()} - {"upstream"}
        report["kernel"] = kernels.pop() if kernels else "upstream"


YES_NO = {True: "yes", False: "no", None: "not checked"}
"""How a yes-or-no fact of the report reads; None: it was not checked."""


def render_fix(entry: dict[str, Any]) -> list[str]:
    affected = {**YES_NO, None: "cannot judge"}[entry["affected"]]
    lines = [
        f"fix {entry['name']} ({', '.join(entry['related'])}):",
        f"  affected: {affected} ({entry['shape']}): {entry['reason']}",
        f"  disabled: {YES_NO[entry['disabled']]}",
        f"  would do: {entry['would_do']}"
        + (
            f" ({entry['decision']})"
            if entry["decision"] != entry["reason"] and not entry["removes"]
            else ""
        ),
    ]
    if entry["removes"]:
        removes = entry["removes"]
        lines.append(
            f"    removes {removes['file']}:{removes['line']}"
            f" `{removes['statement']}`; keeps every other line"
        )
    lines += [
        f"  state in this process: {entry['status'] or 'not checked'}",
        f"  active in this process: {YES_NO[entry['active']]}",
        f"  on vLLM's loaded code: {YES_NO[entry['on_vllm']]}",
    ]
    if entry["covers"]:
        lines.append("  covers:")
        lines += [f"    - {path}" for path in entry["covers"]]
    lines += [f"  problem: {p}" for p in entry["problems"]]
    return lines


def render(report: dict[str, Any]) -> str:
    lines = [
        f"vLLM: {report['vllm_version']}",
        (
            f"overlay entry point ({ENTRY_POINT_GROUP}): "
            f"{YES_NO[report['entry_point_registered']]}"
        ),
        f"allowed by VLLM_PLUGINS: {YES_NO[report['allowed_by_vllm_plugins']]}",
        f"disabled ({DISABLE_ENV}): "
        + ("all" if report["disabled"] else ", ".join(report["disabled_fixes"]) or "no")
        + (
            f" (ignored: {', '.join(report['disabled_unknown'])}, no fix has that name)"
            if report["disabled_unknown"]
            else ""
        ),
        f"prefix-prefill kernel ({KERNEL_ENV}): {report['kernel'] or 'upstream'}",
    ]
    for entry in report["fixes"]:
        lines += ["", *render_fix(entry)]
    lines += ["", "what the overlay patches:", *render_record(RECORD)]
    return "\n".join(lines)


def healthy(report: dict[str, Any]) -> bool:
    """Every fix :func:`protected`, and no problem anywhere."""
    return not report["not_protected"] and not report["problems"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m vllm_overlay", description=__doc__)
    parser.add_argument(
        "--version",
        action="version",
        version=f"vllm-overlay {__version__}",
        help="print the overlay's version and exit",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--quick", action="store_true", help="read the source only; do not import vLLM"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # vLLM's log handler writes to the sys.stdout it finds when vLLM is first
    # imported (here, inside diagnose): with --json that is stderr, so stdout
    # holds the one JSON object.
    with contextlib.redirect_stdout(sys.stderr) if args.json else nullcontext():
        report = diagnose(load_plugins=not args.quick)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(render(report))
    return 0 if healthy(report) else 1
