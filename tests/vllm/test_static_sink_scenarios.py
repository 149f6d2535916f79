"""StaticSink's scenarios on real release trees, and its mutants.

Stock 0.33.0's ``StaticSinkAttentionBuilder.build`` writes the runner's
shared ``seq_lens`` in place and reassigns fields of the group's shared
metadata: the suite must call StaticSink not fixed there, naming the
lengths, on every reader it drives (the next builders, a second group, the
V1 proposer's rebuilds, Model Runner V2's in-place draft update). With the
series' patch 0004 it is fixed and every plausible wrong fix is caught, the
series' earlier 0004 (no refresh on the draft update) among them; on 0.11.0,
which has no static-sink attention, the checks do not apply, and before
0.28.0 the draft update does not.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from vllm_overlay.fixes.static_sink_seq_lens import FIX
from vllm_patchkit.git.series import load_series
from vllm_patchkit.judge.regression.by_fix.static_sink import (
    DRAFT_UPDATE,
    FACTS,
    NO_DRAFT_UPDATE,
    NOT_APPLICABLE,
    PROPOSER_REBUILDS,
    SINK_ONCE,
    SINK_TWICE,
)
from vllm_patchkit.judge.regression.by_fix.static_sink.mutants import SINK_MUTANTS
from vllm_patchkit.judge.regression.runner import run_scenarios
from vllm_patchkit.trees.releases import clone_release, release_tree
from vllm_patchkit.trees.tree_process import TreeLauncher

pytestmark = pytest.mark.release_trees

FIX_PATCH = load_series().of_fix(FIX)[0].path
LABEL = FIX.pr
SCENARIOS = sorted(FACTS)
CHECKS = [f"{s}[q={q}]" for s in SCENARIOS for q in (1, 3)]


@pytest.fixture(scope="module")
def fixed_0_33(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("static-sink") / "vllm-0.33.0"
    clone_release("0.33.0", tree).run("apply", str(FIX_PATCH))
    return tree


def _suite(tree: Path) -> dict[str, Any]:
    run = run_scenarios(tree, SCENARIOS)
    assert run.report is not None, run.log[-3000:]
    return run.report


def _checks(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in report["checks"] if c["fix"] == LABEL}


def test_stock_0_33_is_not_fixed_and_names_the_lengths() -> None:
    report = _suite(release_tree("0.33.0"))
    verdict = report["fixes"][LABEL]
    assert verdict["verdict"] == "not-fixed", verdict
    checks = _checks(report)
    assert sorted(checks) == CHECKS, checks
    for name, check in checks.items():
        assert check["status"] == "failed", check
        assert name in verdict["why"]
    once = checks[f"{SINK_ONCE}[q=1]"]["detail"]
    # The next group reads the lengths with the sink; padding stays 0.
    assert "shared_seq_lens_kept" in once
    assert "'shared_seq_lens_after': [72, 49, 96, 0]" in once
    assert "later_builders_unaffected" in once
    twice = checks[f"{SINK_TWICE}[q=1]"]["detail"]
    assert "'second_seq_lens_after': [104, 81, 128, 0]" in twice
    proposer = checks[f"{PROPOSER_REBUILDS}[q=1]"]["detail"]
    assert "each_step_sees_sink_once" in proposer
    assert "[105, 82, 129, 0], [138, 115, 162, 0]" in proposer
    # The update follows the runner's tensor, into which the sink was written.
    update = checks[f"{DRAFT_UPDATE}[q=1]"]["detail"]
    assert "violated: runner_seq_lens_only_advanced (" in update
    assert "'runner_seq_lens_after': [75, 52, 99, 0]" in update


def test_0_33_with_the_fix_is_fixed(fixed_0_33: Path) -> None:
    report = _suite(fixed_0_33)
    assert report["fixes"][LABEL]["verdict"] == "fixed", report["fixes"][LABEL]
    checks = _checks(report)
    assert sorted(checks) == CHECKS
    assert all(c["status"] == "passed" for c in checks.values()), checks


def test_0_11_has_no_static_sink_so_the_checks_do_not_apply() -> None:
    report = _suite(release_tree("0.11.0"))
    verdict = report["fixes"][LABEL]
    assert verdict["verdict"] == "cannot-judge", verdict
    checks = _checks(report)
    assert sorted(checks) == CHECKS
    for check in checks.values():
        assert (check["status"], check["applies"]) == ("not run", False), check
        assert check["detail"] == NOT_APPLICABLE


@pytest.mark.slow
def test_0_27_has_no_fused_drafting_so_the_draft_update_does_not_apply() -> None:
    run = run_scenarios(release_tree("0.27.0"), [DRAFT_UPDATE])
    assert run.report is not None, run.log[-3000:]
    checks = _checks(run.report)
    assert sorted(checks) == [f"{DRAFT_UPDATE}[q={q}]" for q in (1, 3)]
    for check in checks.values():
        assert (check["status"], check["applies"]) == ("not run", False), check
        assert check["detail"] == NO_DRAFT_UPDATE


SINK_MUTANTS_MODULE = "vllm_patchkit.judge.regression.by_fix.static_sink.mutants"


def _mutants(tree: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", SINK_MUTANTS_MODULE, "--json"],
        env=TreeLauncher.of(tree).env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    lines = proc.stdout.strip().splitlines()
    assert lines, proc.stderr[-3000:]
    return json.loads(lines[-1])


def test_the_fix_survives_and_every_wrong_fix_is_killed(fixed_0_33: Path) -> None:
    report = _mutants(fixed_0_33)
    assert report["baseline_failing"] == []
    assert [m["name"] for m in report["mutants"]] == [m.name for m in SINK_MUTANTS]
    survivors = [m["name"] for m in report["mutants"] if not m["killed"]]
    assert survivors == []
    # The series' earlier 0004 dies on the in-place draft update alone.
    earlier = next(
        m for m in report["mutants"] if m["name"] == "no_refresh_on_draft_update"
    )
    assert earlier["failing_checks"] == [f"{DRAFT_UPDATE}[q={q}]" for q in (1, 3)]


@pytest.mark.slow
def test_the_stock_method_is_killed() -> None:
    report = _mutants(release_tree("0.33.0"))
    assert sorted(report["baseline_failing"]) == CHECKS, report["baseline_failing"]
