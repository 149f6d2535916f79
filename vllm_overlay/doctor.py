"""``python -m vllm_overlay``: is this vLLM affected, and is the overlay on?

Each fix is reported on its own (a vLLM can need one, both or none). By
default it loads vLLM's general plugins exactly as vLLM does at start-up and
then imports each module an armed fix patches, to confirm the fix is really
on vLLM's loaded code. ``--quick`` answers from the source alone (no vLLM
import). Both end with the overlay's record: what it patches, why, how, and
when that goes. The top-level verdict fields of ``--json`` are the #51585
fix's; ``fixes`` holds every fix's.
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
from vllm_overlay.entry_points import ENTRY_POINT_GROUP, entry_point_registered
from vllm_overlay.fix import FixPlan
from vllm_overlay.fixes import RECORD, assess_installed, disable_setting, on_vllm
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


def fix_report(state: InstallState, disabled: bool) -> dict[str, Any]:
    """One fix's part of the report (before loading vLLM's plugins)."""
    target = next(t for t in RECORD if t.name == state.name)
    code = state.code
    plan = state.plan
    return {
        "name": state.name,
        "target": target.target,
        "related": [item.split(":")[0] for item in target.related],
        "affected": (code.affected if code.judged else None) if code else False,
        "shape": str(code.shape) if code else None,
        "reason": code.detail if code else state.reason,
        "decision": state.reason,
        "file": str(code.file) if code else None,
        "line": code.line if code else None,
        "judged": bool(code and code.judged),
        "would_do": str(state.action),
        "removes": (
            {
                "file": str(plan.file),
                "line": plan.removed_line,
                "statement": plan.removed_source,
            }
            if isinstance(plan, FixPlan)
            else None
        ),
        "disabled": disabled,
        "status": None,
        "active": None,
        "on_vllm": None,
        "covers": list(state.covered),
        "problems": [] if not code or code.judged else [state.reason],
    }


def diagnose(load_plugins: bool = True) -> dict[str, Any]:
    disabled, unknown = disable_setting()
    fixes = [fix_report(state, state.name in disabled) for state in assess_installed()]
    first = fixes[0]
    report: dict[str, Any] = {
        "vllm_version": vllm_version(),
        # The #51585 fix's verdict at the top level, as before #17.
        **{
            key: first[key]
            for key in (
                "affected",
                "shape",
                "reason",
                "decision",
                "file",
                "line",
                "judged",
                "would_do",
                "removes",
                "status",
                "covers",
            )
        },
        "entry_point_registered": entry_point_registered(),
        "allowed_by_vllm_plugins": allowed_by_vllm_plugins(),
        # True when every fix is off: what the fixes' own entries say.
        "disabled": disabled == {target.name for target in RECORD},
        "disabled_fixes": sorted(disabled),
        "disabled_unknown": unknown,
        "strict": env_flag(STRICT_ENV),
        "kernel_opt_in": env_flag(KERNEL_ENV),
        "kernel": None,
        "active": None,
        "fix_on_vllm_class": None,
        "problems": list(first["problems"]),
        "fixes": fixes,
        "record": [target.as_dict() for target in RECORD],
    }
    if not load_plugins:
        return report
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    states = plugin.current_states()
    report["in_process_action"] = (
        str(states[first["name"]].action) if states else "not loaded"
    )
    for entry in fixes:
        state = states.get(entry["name"])
        if state and state.action is Action.INSTALLED:
            # Import the module as vLLM would: that is what installs the fix.
            entry["on_vllm"] = on_vllm(entry["name"], load=True)
    for entry in fixes:
        state = states.get(entry["name"])
        entry["status"] = state.status if state else "not loaded"
        entry["active"] = entry["status"] == "installed"
        if state:
            entry["problems"] += list(state.problems)
    report["status"] = first["status"]
    report["active"] = first["active"]
    report["fix_on_vllm_class"] = first["on_vllm"]
    state = states.get(first["name"])
    if state and report["kernel_opt_in"]:
        importlib.import_module(caller_module())
        report["kernel"] = state.kernel
    report["problems"] = list(first["problems"])
    return report


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
    """Every fix: not affected, or active; and no problem anywhere."""
    return all(
        (not entry["affected"] or entry["active"] is not False)
        and not entry["problems"]
        for entry in report["fixes"]
    )


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
