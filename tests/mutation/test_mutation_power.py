"""Mutation tier: the runtime scenarios fail on every wrong fix (kill rate 100%).

Each mutant of a fix's file (ROCM_ATTN's ``build_for_cudagraph_capture``,
the #53821 pair's ROCM_AITER_UNIFIED_ATTN module, StaticSink's
``StaticSinkAttentionBuilder.build``) runs the whole regression suite in its
own subprocess, two at a time, over the one patched installed tree of the
session. A survivor is a scenario the suite lacks. The
mutants the AST invariant calls fixed (see ``test_mutants.FOOL_THE_AST``)
show the runtime scenarios catch what the static check cannot.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mutation.test_mutants import FOOL_THE_AST, UNPROVEN_BY_THE_AST
from vllm_patchkit.judge.mutation.runner import (
    MutationReport,
    format_report,
    run_mutation,
)
from vllm_patchkit.judge.mutation.targets import ALL_MUTANTS
from vllm_patchkit.judge.regression.by_fix.rocm_aiter_unified.mutants import (
    TIER_PAIR_MUTANTS,
)
from vllm_patchkit.judge.regression.by_fix.static_sink import FACTS as SINK_FACTS
from vllm_patchkit.judge.regression.by_fix.static_sink.mutants import SINK_MUTANTS

pytestmark = pytest.mark.mutation


@pytest.fixture(scope="module")
def mutation_report(patched_installed_tree: Path) -> MutationReport:
    report = run_mutation(patched_installed_tree, ALL_MUTANTS, jobs=2)
    print(format_report(report))
    for baseline in report.baselines:
        print(f"{baseline.name}: {baseline.fixes}, {baseline.seconds:.0f} s")
    return report


def test_every_mutant_ran_against_its_own_module(
    mutation_report: MutationReport,
) -> None:
    assert [r.name for r in mutation_report.runs] == [m.name for m in ALL_MUTANTS]
    assert [(r.name, r.problem) for r in mutation_report.runs if r.problem] == []
    assert not mutation_report.baseline.killed
    assert mutation_report.baseline.counts["failed"] == 0


def test_every_mutant_is_killed_by_a_behavioural_failure(
    mutation_report: MutationReport,
) -> None:
    """A harness error or a check that could not run is never a kill."""
    for run in mutation_report.runs:
        assert run.killed and run.failed_checks, (run.name, run.problem)
        assert run.counts["failed"] == len(run.failed_checks) > 0, run.name


def test_kill_rate_is_total(mutation_report: MutationReport) -> None:
    assert mutation_report.survivors == [], format_report(mutation_report)
    assert mutation_report.kill_rate == 1.0


def test_mutants_that_fool_the_ast_die_at_run_time(
    mutation_report: MutationReport,
) -> None:
    runs = {r.name: r for r in mutation_report.runs}
    for name in FOOL_THE_AST:
        assert runs[name].invariant_shape == "fixed"
        assert runs[name].killed and runs[name].failed_checks, name
    for name in UNPROVEN_BY_THE_AST:
        assert runs[name].invariant_shape == "unknown"
        assert runs[name].killed and runs[name].failed_checks, name


def test_builder_level_scenarios_kill_the_host_mutants(
    mutation_report: MutationReport,
) -> None:
    """Not only the direct probe: a real victim builder fails on each."""
    runs = {r.name: r for r in mutation_report.runs}
    for name in ("host_alias", "host_torch_fn", "host_partial", "host_rebound"):
        victims = [c for c in runs[name].failed_checks if c.startswith("rocm_then_")]
        assert victims, (name, runs[name].failed_checks)
    stale = runs["host_stale_restore"].failed_checks
    assert any(c.startswith("repeated_capture") for c in stale), stale


def test_the_aiter_pair_mutants_die_on_the_aiter_checks(
    mutation_report: MutationReport,
) -> None:
    """Each wrong AITER combination fails a #53821 check, not only others."""
    runs = {r.name: r for r in mutation_report.runs}
    for mutant in TIER_PAIR_MUTANTS:
        failed = runs[mutant.name].failed_checks
        assert any(c.startswith("aiter_unified_") for c in failed), (
            mutant.name,
            failed,
        )


def test_each_baseline_is_judged_fixed_for_every_fix(
    mutation_report: MutationReport,
) -> None:
    """The unmutated files, forked and in fresh interpreters: every fix,
    StaticSink (0004) included, is fixed before any kill counts."""
    assert [b.name for b in mutation_report.baselines] == [
        "baseline",
        "baseline-static-sink",
    ]
    for baseline in mutation_report.baselines:
        assert baseline.problem is None and not baseline.killed, baseline.name
        assert "StaticSink" in baseline.fixes, baseline.fixes
        assert set(baseline.fixes.values()) == {"fixed"}, baseline.fixes


def test_the_static_sink_mutants_die_on_the_static_sink_checks(
    mutation_report: MutationReport,
) -> None:
    runs = {r.name: r for r in mutation_report.runs}
    for mutant in SINK_MUTANTS:
        run = runs[mutant.name]
        assert run.invariant_shape == "not-fixed", mutant.name
        assert run.fixes["StaticSink"] == "not-fixed", (mutant.name, run.fixes)
        failed = run.failed_checks
        assert failed and all(
            c.startswith(tuple(f"{s}[" for s in SINK_FACTS)) for c in failed
        ), (mutant.name, failed)
