"""Measure what the overlay does on one vLLM tree, through vLLM's own plugin loading.

Two fresh processes run the tree in its runtime
(:mod:`vllm_patchkit.trees.tree_runtime`):
one with vLLM's plugins off (``VLLM_PLUGINS=""``), one that lets vLLM load
only the overlay (``VLLM_PLUGINS=vllm_overlay``) through
``vllm.plugins.load_general_plugins()``, exactly as a vLLM process does at
start-up. Each then runs the #51585 capture scenario on the tree's real code:
the ROCm builder's ``build_for_cudagraph_capture`` on a uniform decode batch,
then what the next KV-cache group's builder sees in the shared host offsets
(and, where the release has it, MiniMax-M3's indexer builder, the PR's crash).
The verdict compares the two runs; nothing here is inferred from the AST.

``python -m vllm_patchkit.judge.overlay_probe TREE [--json]`` probes one tree; the
``--child MODE OUTPUT`` form is the measuring process itself (it imports torch
and vLLM, the parent never does).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_overlay.fixes import FIXES as REGISTRY
from vllm_patchkit.judgement import CANNOT_JUDGE_WORDS, Verdict
from vllm_patchkit.trees.child_json import run_json_child

if TYPE_CHECKING:
    from vllm_patchkit.trees.tree_process import TreeLauncher

FIXES = "fixes"
INERT = "inert"
FAILS = "fails"
CANNOT_JUDGE = CANNOT_JUDGE_WORDS
VERDICT_OF = {
    FIXES: Verdict.FIXED,
    INERT: Verdict.FIXED,
    FAILS: Verdict.NOT_FIXED,
    CANNOT_JUDGE: Verdict.CANNOT_JUDGE,
}
"""Each status as a verdict: with the overlay the tree is right (it fixes
the bug, or stays out of a fixed release), wrong, or unjudged."""

BUG = "bug reproduced"
PASSES = "passes"

WITHOUT = "without"
WITH = "with"
PLUGIN_NAME = "vllm_overlay"
"""The overlay's entry-point name in ``vllm.general_plugins``."""
OVERLAY_LOGGER = "vllm.plugins.vllm_overlay"
SCENARIOS = ("capture_effects", "minimax_indexer_after_rocm")
"""The regression suite's scenarios this probe runs (:func:`capture_scenario`)."""
_OWNERS = {fix.name for fix in REGISTRY if set(SCENARIOS) & set(fix.scenarios)}
JUDGED = tuple(
    fix.name for fix in REGISTRY if fix.name in _OWNERS or _OWNERS & set(fix.needs)
)
"""The fixes this probe's scenarios judge: those whose ``scenarios`` name
them (the registry's word) and those built on them. Another fix's install
(StaticSink, on every release it affects) is reported, and judged by its own
scenarios in the regression suite, not here."""


@dataclass(frozen=True)
class OverlayResult:
    """The overlay's effect on one tree, measured with and without it."""

    status: str
    """``fixes`` | ``inert`` | ``fails`` | ``cannot judge``."""
    without: str
    """The scenario's outcome with vLLM's plugins off."""
    with_overlay: str
    """The scenario's outcome with the overlay loaded by vLLM."""
    installed: tuple[str, ...]
    """Fixes the overlay reported installed on vLLM's classes."""
    why: str
    seconds: float
    fixes: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per fix, what the overlay recorded: action, status, reason, problems."""
    log: tuple[str, ...] = ()
    """What the overlay logged (every level) in the run with it."""
    runtime: dict[str, Any] | None = None
    """The tree's runtime (torch, pinned torch, extras)."""

    @property
    def verdict(self) -> Verdict:
        return VERDICT_OF[self.status]

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "without": self.without,
            "with_overlay": self.with_overlay,
            "installed": list(self.installed),
            "why": self.why,
            "seconds": round(self.seconds, 1),
            "fixes": self.fixes,
            "log": list(self.log),
            "runtime": self.runtime,
        }


def probe_overlay(tree: Path, timeout: float = 600) -> OverlayResult:
    """Run the scenario on ``tree`` without the overlay and with it; judge."""
    from vllm_patchkit.errors import PatchkitError
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
    runs = {mode: _run_child(launcher, mode, timeout) for mode in (WITHOUT, WITH)}
    result = judge(runs[WITHOUT], runs[WITH])
    assert launcher.runtime is not None  # a tree's launcher has one
    return OverlayResult(
        **result,
        seconds=time.monotonic() - start,
        runtime=launcher.runtime.to_json(),
    )


def _run_child(launcher: TreeLauncher, mode: str, timeout: float) -> dict[str, Any]:
    """One measuring process; its JSON, or why there is none."""
    env = launcher.env(
        VLLM_PLUGINS=PLUGIN_NAME if mode == WITH else "",
        VLLM_OVERLAY_DISABLE=None,
        VLLM_OVERLAY_STRICT=None,
    )
    run = run_json_child(
        "vllm_patchkit.judge.overlay_probe",
        lambda output: ["--child", mode, str(output)],
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


def judge(without: dict[str, Any], with_: dict[str, Any]) -> dict[str, Any]:
    """The verdict from the two runs' reports (see the contract's words)."""
    fixes = with_.get("fixes") or {}
    installed = tuple(n for n, f in fixes.items() if f.get("status") == "installed")
    judged = [n for n in installed if n in JUDGED]
    common = {
        "without": _outcome(without),
        "with_overlay": _outcome(with_),
        "installed": installed,
        "fixes": fixes,
        "log": tuple(with_.get("log", ())),
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
    broken, fixed = without["scenario"]["bug"], with_["scenario"]["bug"]
    scenario = with_["scenario"]
    if broken and not fixed and judged:
        why = (
            f"without the overlay {_seen(without)}; with it {_seen(with_)}, "
            f"device offsets zeroed: {scenario['device_zeroed']}"
        )
        if scenario["device_zeroed"]:
            return {**common, "status": FIXES, "why": why}
        return {**common, "status": FAILS, "why": f"{why} (the band-aid was lost)"}
    if broken:
        return {
            **common,
            "status": FAILS,
            "why": f"with the overlay {_seen(with_)}; it installed "
            f"{list(installed) or 'nothing'}",
        }
    if fixed:
        return {
            **common,
            "status": FAILS,
            "why": f"stock code passes but with the overlay {_seen(with_)}",
        }
    modules = {fix.module for fix in REGISTRY if fix.name in JUDGED}
    hooks = [m for m in with_.get("hooks_left") or () if m in modules]
    if judged or hooks or scenario != without["scenario"]:
        return {
            **common,
            "status": FAILS,
            "why": "a fixed release, yet the overlay changed it: installed "
            f"{judged}, import hooks left {hooks}, "
            "scenario facts "
            f"{'differ' if scenario != without['scenario'] else 'equal'}",
        }
    actions = {n: f.get("action") for n, f in fixes.items()}
    return {
        **common,
        "status": INERT,
        "why": f"the scenario passes without the overlay and with it; the overlay "
        f"installed none of the fixes it judges ({actions})",
    }


def _outcome(run: dict[str, Any]) -> str:
    if "error" in run:
        return "not run"
    return BUG if run["scenario"]["bug"] else PASSES


def _seen(run: dict[str, Any]) -> str:
    scenario = run["scenario"]
    text = f"the next builder sees query lengths {scenario['next_query_lens']}"
    indexer = scenario.get("indexer")
    if indexer and indexer.get("raised"):
        text += f" and MiniMax-M3's indexer raises {indexer['raised']}"
    elif indexer and "decode_query_len" in indexer:
        length = indexer["decode_query_len"]
        text += f" and MiniMax-M3's indexer builds (query length {length})"
    return text


# --- the measuring process ---------------------------------------------------


def child(mode: str, output: Path) -> None:
    """Load vLLM's plugins as vLLM does, run the scenario, write the JSON."""
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
        report["scenario"] = capture_scenario()
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


def capture_scenario() -> dict[str, Any]:
    """#51585 through the regression suite's own scenarios (plain decode), so
    the probe and the suite cannot disagree: the ROCm capture's effects, the
    query lengths the next group's builder derives from the shared host
    offsets (the bug: some become 0), and MiniMax-M3's indexer after it.
    """
    import importlib

    from vllm_overlay.fixes.rocm_aiter_unified_builder import install as aiter_fix
    from vllm_overlay.fixes.rocm_capture_host_offsets import install as fix
    from vllm_patchkit.judge.regression import harness, scenarios

    facts = dict(scenarios.capture_effects(1).facts)
    host = facts["host_after"]
    facts["next_query_lens"] = [b - a for a, b in zip(host, host[1:], strict=False)]
    facts["indexer"] = minimax_indexer()
    facts["bug"] = 0 in facts["next_query_lens"] or bool(
        facts["indexer"] and facts["indexer"].get("raised")
    )
    rocm_attn = importlib.import_module(harness.rocm_builder_cls().__module__)
    facts["fix_on_vllm_class"] = fix.is_installed_on(rocm_attn)
    try:
        aiter = _optional("vllm.v1.attention.backends.rocm_aiter_unified_attn")
    except Exception as exc:  # 0.33.0 asks the GPU for its arch at import
        facts["aiter_module"] = f"not importable here: {type(exc).__name__}: {exc}"
    else:
        if aiter is not None:
            facts["aiter_fix_on_vllm_class"] = aiter_fix.is_installed_on(aiter)
    return facts


def minimax_indexer() -> dict[str, Any] | None:
    """The PR's crash: MiniMax-M3's indexer builder after the ROCm capture
    (None: this release has no MiniMax-M3)."""
    from vllm_patchkit.judge.regression import scenarios
    from vllm_patchkit.judge.regression.verdict import describe_error

    outcome = scenarios.minimax_indexer_after_rocm(1)
    if outcome.status == "unavailable":
        return None
    if outcome.status == "raised":
        return {"raised": describe_error(outcome.error)}
    return {"decode_query_len": outcome.facts["decode_query_len"]}


def _optional(name: str) -> Any:
    """The module, or None when this release has no such module."""
    import importlib
    import importlib.util

    try:
        if importlib.util.find_spec(name) is None:
            return None
    except ModuleNotFoundError:
        return None
    return importlib.import_module(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m vllm_patchkit.judge.overlay_probe", description=__doc__
    )
    parser.add_argument("tree", nargs="?", type=Path)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "OUTPUT"))
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], Path(args.child[1]))
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
