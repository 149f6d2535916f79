"""``python -m vllm_overlay``: is this vLLM affected, and is the overlay on?

Each fix is reported on its own (a vLLM can need one, all or none). By
default it loads vLLM's general plugins exactly as vLLM does at start-up and
then imports each module an armed fix patches, to confirm the fix is really
on vLLM's loaded code. ``--quick`` answers from the source alone (no vLLM
import), judging by the same rule: a needed fix is on when the overlay
would install it as vLLM starts here. Exit 1 when any fix is needed and
not on, or cannot be judged. Both end with the
overlay's record: what it patches, why, how, and when that goes. The
top-level verdict fields of ``--json`` are over every fix; ``fixes`` holds
each fix's.
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


def fix_report(state: InstallState, disabled: bool) -> dict[str, Any]:
    """One fix's part of the report (before loading vLLM's plugins)."""
    fix = by_name(state.name)
    target = fix.record
    code = state.code
    plan = state.plan
    affected = fix.affected(state, state.vllm_version)
    return {
        "name": state.name,
        "target": target.target,
        "related": [item.split(":")[0] for item in target.related],
        "affected": affected,
        "shape": str(code.shape) if code else None,
        "reason": code.detail if code else state.reason,
        "decision": state.reason,
        "file": str(code.file) if code else None,
        "line": code.line if code else None,
        "judged": affected is not None,
        "would_do": str(state.action),
        "removes": plan.removes if plan is not None else None,
        "disabled": disabled,
        "status": None,
        "active": None,
        "on_vllm": None,
        "covers": list(state.covered),
        "problems": [] if affected is not None else [f"cannot judge: {state.reason}"],
        "protected": None,
    }


def diagnose(load_plugins: bool = True) -> dict[str, Any]:
    disabled, unknown = disable_setting()
    fixes = [fix_report(state, state.name in disabled) for state in assess_installed()]
    report: dict[str, Any] = {
        "vllm_version": vllm_version(),
        "entry_point_registered": entry_point_registered(),
        "allowed_by_vllm_plugins": allowed_by_vllm_plugins(),
        # True when every fix is off: what the fixes' own entries say.
        "disabled": disabled == {target.name for target in RECORD},
        "disabled_fixes": sorted(disabled),
        "disabled_unknown": unknown,
        "strict": env_flag(STRICT_ENV),
        "kernel_opt_in": env_flag(KERNEL_ENV),
        "kernel": None,
        "fixes": fixes,
        "record": [target.as_dict() for target in RECORD],
    }
    if load_plugins:
        _load_plugins(report)
    return _summarise(report)


def _load_plugins(report: dict[str, Any]) -> None:
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
    for entry in fixes:
        state = states.get(entry["name"])
        entry["status"] = state.status if state else "not loaded"
        entry["active"] = entry["status"] == "installed"
        if state:
            entry["problems"] += list(state.problems)
    if report["kernel_opt_in"] and states:
        # The kernel rides on a fix (its ``also``): the caller's import swaps it.
        importlib.import_module(caller_module())
        kernels = {state.kernel for state in states.values()} - {"upstream"}
        report["kernel"] = kernels.pop() if kernels else "upstream"


def _summarise(report: dict[str, Any]) -> dict[str, Any]:
    """Each fix's :func:`protected`, and the verdict over every fix."""
    fixes = report["fixes"]
    for entry in fixes:
        entry["protected"] = protected(entry, report)
    verdicts = [entry["affected"] for entry in fixes]
    report["affected"] = (
        True if True in verdicts else None if None in verdicts else False
    )
    report["judged"] = None not in verdicts
    report["needed"] = [e["name"] for e in fixes if e["affected"] is not False]
    report["not_protected"] = [e["name"] for e in fixes if not e["protected"]]
    report["problems"] = [p for e in fixes for p in e["problems"]]
    return report


def protected(entry: dict[str, Any], report: dict[str, Any]) -> bool:
    """Whether this vLLM is safe from one fix's bug: not affected, or the fix
    on. After loading the plugins, "on" is what this process shows (the fix
    installed on vLLM's code); with ``--quick``, what vLLM started here would
    do: the overlay's entry point registered and allowed, the fix not
    disabled, and its decision to install it. A fix that cannot be judged is
    never safe."""
    if entry["affected"] is False:
        return True
    if entry["affected"] is None:
        return False
    if entry["active"] is not None:
        return bool(entry["active"])
    return bool(
        entry["would_do"] == str(Action.INSTALLED)
        and not entry["disabled"]
        and report["entry_point_registered"]
        and report["allowed_by_vllm_plugins"]
    )


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
