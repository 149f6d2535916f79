"""``python -m vllm_overlay``: is this vLLM affected, and is the overlay on?

By default it loads vLLM's general plugins exactly as vLLM does at start-up
and then imports vLLM's ``rocm_attn`` to confirm the fix is really on the
class. ``--quick`` answers from the source alone (no vLLM import). Both end
with the overlay's record: what it patches, why, how, and when that goes.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import json
import os
import sys
from contextlib import nullcontext
from typing import Any

from vllm_overlay import plugin
from vllm_overlay.install import UPSTREAM_MODULE, Action, assess
from vllm_overlay.kernel_switch import CALLER_MODULE, KERNEL_ENV
from vllm_overlay.record import RECORD, render_record

ENTRY_POINT_GROUP = "vllm.general_plugins"
ENTRY_POINT_NAME = "vllm_overlay"


def entry_point_registered() -> bool:
    return any(
        ep.name == ENTRY_POINT_NAME
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    )


def allowed_by_vllm_plugins() -> bool:
    """vLLM loads a general plugin only if VLLM_PLUGINS is unset or names it."""
    value = os.environ.get("VLLM_PLUGINS")
    if value is None:
        return True
    return ENTRY_POINT_NAME in [name.strip() for name in value.split(",")]


def diagnose(load_plugins: bool = True) -> dict[str, Any]:
    assessment = assess()
    code = assessment.code
    report: dict[str, Any] = {
        "vllm_version": assessment.vllm_version,
        "affected": (code.affected if code.judged else None) if code else False,
        "shape": str(code.shape) if code else None,
        "reason": code.detail if code else assessment.reason,
        "decision": assessment.reason,
        "file": str(code.file) if code else None,
        "line": code.line if code else None,
        "judged": bool(code and code.judged),
        "would_do": str(assessment.action),
        "removes": (
            {
                "file": str(assessment.plan.file),
                "line": assessment.plan.removed_line,
                "statement": assessment.plan.removed_source,
            }
            if assessment.plan
            else None
        ),
        "status": None,
        "covers": list(assessment.covered),
        "entry_point_registered": entry_point_registered(),
        "allowed_by_vllm_plugins": allowed_by_vllm_plugins(),
        "disabled": plugin.env_flag(plugin.DISABLE_ENV),
        "strict": plugin.env_flag(plugin.STRICT_ENV),
        "kernel_opt_in": plugin.env_flag(KERNEL_ENV),
        "kernel": None,
        "active": None,
        "fix_on_vllm_class": None,
        "problems": [] if not code or code.judged else [assessment.reason],
        "record": [target.as_dict() for target in RECORD],
    }
    if not load_plugins:
        return report
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    state = plugin.current_state()
    report["in_process_action"] = str(state.action) if state else "not loaded"
    if state and state.action is Action.INSTALLED:
        module = importlib.import_module(UPSTREAM_MODULE)
        from vllm_overlay.fix import is_installed_on

        report["fix_on_vllm_class"] = is_installed_on(module)
    report["status"] = state.status if state else "not loaded"
    report["active"] = report["status"] == "installed"
    if state and report["kernel_opt_in"]:
        importlib.import_module(CALLER_MODULE)
        report["kernel"] = state.kernel
    if state:
        report["problems"] += list(state.problems)
    return report


def render(report: dict[str, Any]) -> str:
    yes_no = {True: "yes", False: "no", None: "not checked"}
    lines = [
        f"vLLM: {report['vllm_version']}",
        (
            "affected by vLLM #51585: "
            f"{ {**yes_no, None: 'cannot judge'}[report['affected']] }"
            f" ({report['shape']}): {report['reason']}"
        ),
        (
            f"overlay entry point ({ENTRY_POINT_GROUP}): "
            f"{yes_no[report['entry_point_registered']]}"
        ),
        f"allowed by VLLM_PLUGINS: {yes_no[report['allowed_by_vllm_plugins']]}",
        f"disabled ({plugin.DISABLE_ENV}): {yes_no[report['disabled']]}",
        f"would do: {report['would_do']}"
        + (
            f" ({report['decision']})"
            if report["decision"] != report["reason"] and not report["removes"]
            else ""
        ),
        *(
            [
                (
                    f"  removes {report['removes']['file']}:{report['removes']['line']}"
                    f" `{report['removes']['statement']}`; keeps every other line"
                )
            ]
            if report["removes"]
            else []
        ),
        f"state in this process: {report['status'] or 'not checked'}",
        f"active in this process: {yes_no[report['active']]}",
        f"fix on vLLM's builder class: {yes_no[report['fix_on_vllm_class']]}",
        f"prefix-prefill kernel ({KERNEL_ENV}): {report['kernel'] or 'upstream'}",
    ]
    if report["covers"]:
        lines.append("covers:")
        lines += [f"  - {path}" for path in report["covers"]]
    lines += [f"problem: {p}" for p in report["problems"]]
    lines += ["", "what the overlay patches:", *render_record()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vllm_overlay", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--quick", action="store_true", help="read the source only; do not import vLLM"
    )
    args = parser.parse_args(argv)
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
    healthy = not report["affected"] or report["active"] is not False
    return 0 if healthy and not report["problems"] else 1
