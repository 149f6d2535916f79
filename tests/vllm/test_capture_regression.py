"""The regression tests vLLM #51585 lacked, on real vLLM 0.28.0 code (CPU).

Each test looks at both trees: stock installed vLLM must show the bug (so
the test can fail), and a copy of the same install with the patch series
applied by ``git am`` must not. Both run in subprocesses that import vLLM
from their tree; the reports name the file that was imported.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_patchkit.judge.regression.by_fix.rocm_capture_host_offsets.checks import (
    INDEXER_ASSERT,
    INDEXER_FILE,
    is_pr_crash,
)
from vllm_patchkit.judge.regression.runner import TreeReport
from vllm_patchkit.judge.regression.scenarios import DECODE_QUERY_LENS, Outcome


def _outcome(report: TreeReport, scenario: str, query_len: int) -> Outcome:
    assert report.report is not None
    for raw in report.report["outcomes"]:
        if raw["scenario"] == scenario and raw["decode_query_len"] == query_len:
            return Outcome(**raw)
    raise AssertionError(f"no outcome for {scenario}[q={query_len}]")


def test_each_run_imports_vllm_from_its_own_tree(
    scenario_reports: dict[str, TreeReport], patched_installed_tree: Path
) -> None:
    stock = scenario_reports["stock"].report
    patched = scenario_reports["patched"].report
    assert stock and patched
    assert "site-packages" in stock["vllm_file"]
    assert Path(patched["vllm_file"]).is_relative_to(patched_installed_tree)
    assert stock["vllm_version"] == patched["vllm_version"] == "0.28.0"


@pytest.mark.parametrize("query_len", DECODE_QUERY_LENS)
def test_capture_zeroes_device_offsets_in_place_and_keeps_host_offsets(
    scenario_reports: dict[str, TreeReport], query_len: int
) -> None:
    facts = _outcome(scenario_reports["patched"], "capture_effects", query_len).facts
    assert facts["device_same_tensor"], (
        "device offsets were replaced, not zeroed in place"
    )
    assert facts["device_zeroed"]
    assert facts["seq_lens_all_one"]
    assert facts["host_same_tensor"]
    assert facts["host_unchanged"], facts["host_after"]
    expected = list(range(0, (4 + 1) * query_len, query_len))
    assert facts["host_after"] == expected


@pytest.mark.parametrize("query_len", DECODE_QUERY_LENS)
def test_stock_capture_zeroes_host_offsets(
    scenario_reports: dict[str, TreeReport], query_len: int
) -> None:
    facts = _outcome(scenario_reports["stock"], "capture_effects", query_len).facts
    assert facts["device_zeroed"] and facts["device_same_tensor"]
    assert not facts["host_unchanged"]
    assert facts["host_after"] == [0] * 5


@pytest.mark.parametrize("query_len", DECODE_QUERY_LENS)
def test_stock_minimax_indexer_crashes_like_the_pr_trace(
    scenario_reports: dict[str, TreeReport], query_len: int
) -> None:
    outcome = _outcome(
        scenario_reports["stock"], "minimax_indexer_after_rocm", query_len
    )
    assert outcome.status == "raised", outcome
    assert outcome.error is not None
    assert outcome.error["type"] == "AssertionError"
    assert outcome.error["relpath"] == INDEXER_FILE
    assert outcome.error["source"] == INDEXER_ASSERT
    assert outcome.error["function"] == "build"
    assert is_pr_crash(outcome)


@pytest.mark.parametrize("query_len", DECODE_QUERY_LENS)
def test_patched_minimax_indexer_builds_decode_metadata(
    scenario_reports: dict[str, TreeReport], query_len: int
) -> None:
    outcome = _outcome(
        scenario_reports["patched"], "minimax_indexer_after_rocm", query_len
    )
    assert outcome.status == "ok", outcome.error
    assert outcome.facts == {"num_decodes": 4, "decode_query_len": query_len}


def test_overall_verdicts(scenario_reports: dict[str, TreeReport]) -> None:
    assert scenario_reports["stock"].bug_reproduced
    assert not scenario_reports["stock"].fixed
    assert scenario_reports["stock"].returncode == 1
    assert scenario_reports["patched"].fixed
    assert not scenario_reports["patched"].bug_reproduced
    assert scenario_reports["patched"].returncode == 0
