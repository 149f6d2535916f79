"""Measure what the overlay does on one vLLM tree, through vLLM's own plugin loading.

Two fresh processes run the tree in its runtime
(:mod:`vllm_patchkit.trees.tree_runtime`):
one with vLLM's plugins off (``VLLM_PLUGINS=""``), one that lets vLLM load
only the overlay (``VLLM_PLUGINS=vllm_overlay``) through
``vllm.plugins.load_general_plugins()``, exactly as a vLLM process does at
start-up. Each then runs, on the tree's real code, the core scenarios of
every fix of the registry whose code the tree has, through the regression
suite's own scenario registry and per-fix verdict
(:mod:`vllm_patchkit.judge.regression`), so the probe and the suite cannot
disagree. Each fix gets a part (:func:`part`): one the tree needs (read
from its code, as doctor reads it) must show its bug without the overlay
and pass with it, installed; one it does not need must come out the same
both ways, never installed. The cell is the worst part. Nothing here is
inferred from the AST but which fixes the tree needs.

``python -m vllm_patchkit.judge.overlay_probe TREE [--json]`` probes one tree; the
``--child MODE OUTPUT`` form is the measuring process itself (it imports torch
and vLLM, the parent never does).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_overlay.entry_points import ENTRY_POINT_NAME
from vllm_overlay.fixes import FIXES as REGISTRY
from vllm_overlay.fixes.base import Fix
from vllm_overlay.state import Action
from vllm_patchkit.judgement import Verdict
from vllm_patchkit.trees.child_json import run_json_child

if TYPE_CHECKING:
    from vllm_patchkit.trees.tree_process import TreeLauncher

FIXES = "fixes"
INERT = "inert"
FAILS = "fails"
CANNOT_JUDGE = Verdict.CANNOT_JUDGE.words
VERDICT_OF = {
    FIXES: Verdict.FIXED,
    INERT: Verdict.FIXED,
    FAILS: Verdict.NOT_FIXED,
    CANNOT_JUDGE: Verdict.CANNOT_JUDGE,
}
"""Each status as a verdict: with the overlay the tree is right (it fixes
the bug, or stays out of a fixed release), wrong, or unjudged."""
RANK = (FAILS, CANNOT_JUDGE, FIXES, INERT)
"""The cell is its fixes' worst part: a failure outranks what could not be
judged, which outranks a fix shown (a cell says fixes only when every part
that could be judged was)."""

BUG = "bug reproduced"
PASSES = "passes"

WITHOUT = "without"
WITH = "with"
OVERLAY_LOGGER = "vllm.plugins.vllm_overlay"
INSTALLED = "installed"
"""The overlay's status for a fix installed on vLLM's loaded class."""


@dataclass(frozen=True)
class OverlayResult:
    """The overlay's effect on one tree, measured with and without it."""

    status: str
    """``fixes`` | ``inert`` | ``fails`` | ``cannot judge``: the worst part."""
    without: str
    """The scenarios' outcome with vLLM's plugins off (:func:`outcome`)."""
    with_overlay: str
    """The scenarios' outcome with the overlay loaded by vLLM."""
    installed: tuple[str, ...]
    """Fixes the overlay reported installed on vLLM's classes."""
    why: str
    seconds: float
    parts: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per fix, by its PR label: whether the tree needs it, its part
    (a status word), its verdict without and with the overlay, and why."""
    fixes: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per fix, what the overlay recorded: action, status, reason, problems."""
    log: tuple[str, ...] = ()
    """What the overlay logged (every level) in the run with it."""
    runtime: dict[str, Any] | None = None
    """The tree's runtime (torch, pinned torch, extras)."""

    @property
    def verdict(self) -> Verdict:
        return VERDICT_OF[self.status]

    def parts_line(self) -> str:
        """``#1 inert, #2 fixes``: each fix's part by its label, in order."""
        return ", ".join(f"{label} {p['part']}" for label, p in self.parts.items())

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {
            "installed": list(self.installed),
            "seconds": round(self.seconds, 1),
            "log": list(self.log),
        }


def probe_overlay(tree: Path, timeout: float = 600) -> OverlayResult:
    """Run the scenarios on ``tree`` without the overlay and with it; judge."""
    from vllm_patchkit.errors import PatchkitError
    from vllm_patchkit.judge.doctor import fix_findings
    from vllm_patchkit.judge.regression.by_fix import core_of
    from vllm_patchkit.trees.tree_process import TreeLauncher

    start = time.monotonic()
    tree = Path(tree).resolve()
    try:
        launcher = TreeLauncher.of(tree)
    except PatchkitError as exc:
        return OverlayResult(
            CANNOT_JUDGE,
            "not run",
            "not run",
            (),
            f"no runtime for {tree}: {exc}",
            time.monotonic() - start,
        )
    read = fix_findings(tree)
    needs = {found.name: found.affected for found in read}
    # Every fix whose code the tree has: a needed one shows what the overlay
    # fixes, another that the overlay leaves it as it is.
    names = [
        name
        for fix, found in zip(REGISTRY, read, strict=True)
        if found.action is not Action.ABSENT
        for name in core_of(fix.name)
    ]
    runs = {
        mode: _run_child(launcher, mode, names, timeout) for mode in (WITHOUT, WITH)
    }
    result = judge(runs[WITHOUT], runs[WITH], needs)
    assert launcher.runtime is not None  # a tree's launcher has one
    return OverlayResult(
        **result,
        seconds=time.monotonic() - start,
        runtime=launcher.runtime.to_json(),
    )


def _run_child(
    launcher: TreeLauncher, mode: str, scenarios: list[str], timeout: float
) -> dict[str, Any]:
    """One measuring process; its JSON, or why there is none."""
    env = launcher.env(
        VLLM_PLUGINS=ENTRY_POINT_NAME if mode == WITH else "",
        VLLM_OVERLAY_DISABLE=None,
        VLLM_OVERLAY_STRICT=None,
    )
    run = run_json_child(
        "vllm_patchkit.judge.overlay_probe",
        lambda output: [
            "--child",
            mode,
            str(output),
            *(f"--scenario={name}" for name in scenarios),
        ],
        env=env,
        timeout_s=timeout,
        scratch_prefix="vllm-overlay-probe-",
        output_name="run.json",
    )
    if run.timed_out:
        return {"error": f"the {mode}-overlay run took over {timeout:.0f} s"}
    if run.data is not None:
        return run.data
    tail = run.log.strip().splitlines()[-3:]
    return {
        "error": f"the {mode}-overlay run exited {run.returncode} with no "
        f"report: {' | '.join(tail)}"
    }


def judge(
    without: dict[str, Any],
    with_: dict[str, Any],
    needs: Mapping[str, bool | None],
) -> dict[str, Any]:
    """The verdict from the two runs' reports and which fixes the tree
    needs, by name (see the contract's words)."""
    fixes = with_.get("fixes") or {}
    installed = tuple(n for n, f in fixes.items() if f.get("status") == INSTALLED)
    common = {
        "without": outcome(without, needs),
        "with_overlay": outcome(with_, needs),
        "installed": installed,
        "fixes": fixes,
        "log": tuple(with_.get("log", ())),
        "parts": {},
    }
    for mode, run in ((WITHOUT, without), (WITH, with_)):
        if "error" in run:
            return {**common, "status": CANNOT_JUDGE, "why": run["error"]}
        if run.get("plugins_loaded") != (mode == WITH):
            what = "did not load" if mode == WITH else "loaded"
            return {
                **common,
                "status": CANNOT_JUDGE,
                "why": f"vLLM's plugin loader {what} the overlay in the "
                f"{mode}-overlay run ({run.get('overlay_file')})",
            }
    parts = {fix.pr: part(fix, needs.get(fix.name), without, with_) for fix in REGISTRY}
    status = min((p["part"] for p in parts.values()), key=RANK.index, default=INERT)
    why = "; ".join(f"{label}: {p['part']} ({p['why']})" for label, p in parts.items())
    return {**common, "parts": parts, "status": status, "why": why}


def part(
    fix: Fix, needed: bool | None, without: dict[str, Any], with_: dict[str, Any]
) -> dict[str, Any]:
    """One fix's part in the cell, from its verdicts in the two runs.

    Needed: its bug without the overlay, a pass with it and the overlay's
    install on vLLM's loaded module make ``fixes``. Not needed (or its code
    unreadable, which the overlay leaves alone): the same outcome both ways
    and nothing installed or armed make ``inert``.
    """
    before, after = _verdict(without, fix), _verdict(with_, fix)
    state = (with_.get("fixes") or {}).get(fix.name) or {}
    on_vllm = (with_.get("on_vllm") or {}).get(fix.name)
    installed = state.get("status") == INSTALLED or bool(on_vllm)
    armed = fix.module in (with_.get("hooks_left") or ())
    base = {
        "needed": needed,
        "without": _word(before, needed),
        "with": _word(after, needed),
        "installed": installed,
    }

    def said(status: str, why: str) -> dict[str, Any]:
        return {**base, "part": status, "why": why}

    seen = f"without: {_why(without, fix)}; with: {_why(with_, fix)}"
    if needed:
        if before is None or after is None:
            return said(CANNOT_JUDGE, "needed, but its scenarios did not run")
        if after is Verdict.NOT_FIXED:
            return said(FAILS, f"{seen} (installed: {installed})")
        if Verdict.CANNOT_JUDGE in (before, after):
            return said(CANNOT_JUDGE, seen)
        if before is Verdict.FIXED:
            return said(CANNOT_JUDGE, f"needed, yet its bug did not show: {seen}")
        if not installed or on_vllm is False:
            return said(
                FAILS,
                f"passes with the overlay, which did not install it "
                f"on vLLM's class ({state.get('status')}, on vLLM: {on_vllm})",
            )
        return said(FIXES, f"without: {_why(without, fix)}; with: passes, installed")
    if installed or armed:
        return said(
            FAILS,
            f"not needed here (needed: {needed}), yet the overlay "
            f"{'installed' if installed else 'armed'} it",
        )
    if before != after:
        return said(FAILS, f"the overlay changed its outcome: {seen}")
    if before is None:
        return said(INERT, "its code is not in this tree; nothing installed")
    if needed is None and before is not Verdict.FIXED:
        return said(CANNOT_JUDGE, f"its code cannot be read, and {seen}")
    both = _word(before, needed)
    if before is not Verdict.FIXED:
        both += f" ({_why(with_, fix)})"
    return said(INERT, f"not needed; {both} both ways, nothing installed or armed")


def _verdict(run: dict[str, Any], fix: Fix) -> Verdict | None:
    """The fix's verdict in one run (None: its scenarios were not run)."""
    judged = (run.get("verdicts") or {}).get(fix.pr)
    return None if judged is None else Verdict(judged["verdict"])


def _why(run: dict[str, Any], fix: Fix) -> str:
    judged = (run.get("verdicts") or {}).get(fix.pr) or {}
    return str(judged.get("why", "not run"))


def _word(verdict: Verdict | None, needed: bool | None) -> str:
    """A fix's verdict in one run in a word; a failure is its bug only
    where the tree needs the fix (elsewhere the checks do not fit it)."""
    if verdict is None:
        return "not run"
    if verdict is Verdict.NOT_FIXED:
        return BUG if needed else FAILS
    return PASSES if verdict is Verdict.FIXED else verdict.words


def outcome(run: dict[str, Any], needs: Mapping[str, bool | None]) -> str:
    """One run in a word: ``bug reproduced`` when a needed fix's bug shows,
    ``fails`` when another fix's checks fail, ``cannot judge`` when a
    needed fix's could not run, else ``passes``."""
    if "error" in run:
        return "not run"
    verdicts = {fix: _verdict(run, fix) for fix in REGISTRY}
    needed = [v for fix, v in verdicts.items() if needs.get(fix.name)]
    if Verdict.NOT_FIXED in needed:
        return BUG
    if Verdict.NOT_FIXED in verdicts.values():
        return FAILS
    if Verdict.CANNOT_JUDGE in needed:
        return CANNOT_JUDGE
    return PASSES


# --- the measuring process ---------------------------------------------------


def child(mode: str, output: Path, scenarios: list[str]) -> None:
    """Load vLLM's plugins as vLLM does, run the scenarios, write the JSON."""
    import logging

    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(f"{record.levelname}: {record.getMessage()}")

    report: dict[str, Any] = {"mode": mode}
    try:
        import vllm
        from vllm.plugins import load_general_plugins

        overlay_logger = logging.getLogger(OVERLAY_LOGGER)
        overlay_logger.addHandler(Keep(logging.DEBUG))
        overlay_logger.setLevel(logging.DEBUG)
        report["vllm_version"] = getattr(vllm, "__version__", "unknown")
        report["vllm_file"] = vllm.__file__
        load_general_plugins()
        plugin = sys.modules.get("vllm_overlay.plugin")
        report["plugins_loaded"] = plugin is not None and bool(plugin.current_states())
        overlay = sys.modules.get("vllm_overlay")
        report["overlay_file"] = getattr(overlay, "__file__", None)
        report["verdicts"] = run_fixes(scenarios)
        from vllm_overlay.fixes import on_vllm

        report["on_vllm"] = {fix.name: on_vllm(fix.name) for fix in REGISTRY}
        if plugin is not None:
            from vllm_overlay.import_hook import _AfterImportFinder

            report["fixes"] = {
                name: {
                    "action": str(state.action),
                    "status": state.status,
                    "reason": state.reason,
                    "problems": list(state.problems),
                }
                for name, state in plugin.current_states().items()
            }
            report["hooks_left"] = sorted(
                f.name for f in sys.meta_path if isinstance(f, _AfterImportFinder)
            )
    except Exception as exc:  # the run failed: reported, never a pass
        from vllm_patchkit.judge.regression.records import describe

        report["error"] = describe(exc)
    report["log"] = records
    output.write_text(json.dumps(report, indent=2))


def run_fixes(scenarios: list[str]) -> dict[str, dict[str, str]]:
    """Per fix with a scenario here, the regression suite's verdict over its
    checks (its own runner and rule: :func:`..regression.scenarios.run_all`,
    :func:`..regression.verdict.judge_fixes`)."""
    from vllm_patchkit.judge.regression.scenarios import run_all
    from vllm_patchkit.judge.regression.verdict import (
        fix_of,
        fixed_checks,
        judge_fixes,
    )

    if not scenarios:
        return {}
    ran = {fix_of(name) for name in scenarios}
    checks = fixed_checks(run_all(scenarios))
    return {
        fix: {"verdict": str(verdict), "why": why}
        for fix, (verdict, why) in judge_fixes(checks).items()
        if fix in ran
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m vllm_patchkit.judge.overlay_probe", description=__doc__
    )
    parser.add_argument("tree", nargs="?", type=Path)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "OUTPUT"))
    parser.add_argument(
        "--scenario", action="append", default=[], help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], Path(args.child[1]), args.scenario)
        return 0
    if args.tree is None:
        parser.error("a vLLM tree is required")
    result = probe_overlay(args.tree)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(
            f"{args.tree}: {result.status} (without: {result.without}; with: "
            f"{result.with_overlay}; installed: {', '.join(result.installed) or '-'}; "
            f"{result.seconds:.1f} s)\n  {result.why}"
        )
    return result.verdict.exit_code


if __name__ == "__main__":
    sys.exit(main())
