"""The dynamic pass counts as passed only when it ran a builder (issue #27)."""

from __future__ import annotations

from vllm_patchkit.judge.audit.dynamic import BuilderRun, DynamicResult
from vllm_patchkit.judge.audit.run import dynamic_check


def _run(status: str) -> BuilderRun:
    return BuilderRun("RocmAttentionMetadataBuilder", "rocm_attn.py", 1, None, status)


def test_a_pass_that_ran_no_builder_could_not_run() -> None:
    """A fork's audit where all 50 builders could not run on CPU was
    reported "dynamic pass: passed"; it ran nothing, so it could not run."""
    result = DynamicResult("fork", 0, runs=[_run("could not run")] * 50)

    check = dynamic_check(result).to_json()

    assert check["status"] == "could not run", check
    assert check["why"] == "no builder ran: 0 builder run(s); 50 could not run on CPU"


def test_a_pass_that_ran_a_builder_passed() -> None:
    result = DynamicResult("tree", 0, runs=[_run("ran"), _run("raised")])

    check = dynamic_check(result).to_json()

    assert check == {
        "name": "dynamic pass",
        "status": "passed",
        "why": "1 builder run(s); 1 could not run on CPU",
    }
