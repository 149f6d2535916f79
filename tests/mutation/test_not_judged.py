"""A mutant that only trips the harness is not judged, and the tier says so.

The capture method returning ``None`` leaves the shared metadata exactly as
the fix does; the only scenario that looks at the return value,
``capture_effects``, then fails in the harness (reading ``seq_lens`` of
``None``), not in a behavioural check. Such a run is neither killed nor
survived: it is "not judged", it counts against the kill rate, and the
command exits 1.

One mutant through the runner: the mutation tier's check of its own
accounting, in that extended tier beside ``test_mutation_power.py`` (a
whole runner's run, 50 s of a 2-core machine).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_patchkit.judge.mutation.mutants import Mutant
from vllm_patchkit.judge.mutation.runner import format_report, run_mutation
from vllm_patchkit.judge.regression.by_fix.rocm_capture_host_offsets.mutants import (
    file_mutant,
)

RETURNS_NONE = file_mutant(
    Mutant(
        "returns_none",
        "the capture returns nothing",
        (("return attn_metadata", ("return None",)),),
    )
)


@pytest.mark.mutation
def test_a_run_with_only_harness_errors_is_not_a_kill(
    patched_installed_tree: Path,
) -> None:
    report = run_mutation(patched_installed_tree, [RETURNS_NONE], jobs=1)
    text = format_report(report)
    print(text)

    (run,) = report.runs
    assert not run.killed and run.failed_checks == []
    assert run.problem is not None
    assert run.problem.startswith("not judged: no behavioural check failed, ")
    assert "capture_effects[q=1]: harness error: AttributeError" in run.problem
    assert run.counts["failed"] == 0 and run.counts["ran"] > 0
    assert report.kill_rate == 0.0 and report.survivors == []
    assert "NOT JUDGED (no behavioural check failed): returns_none" in text
