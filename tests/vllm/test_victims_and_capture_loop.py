"""Every builder that reads the shared host offsets, after the ROCm capture.

Victims (``rocm_then_*``): vLLM 0.28.0's builders whose ``build`` or capture
reads ``query_start_loc_cpu``, each run on CPU after
``RocmAttentionMetadataBuilder.build_for_cudagraph_capture`` on one shared
``CommonAttentionMetadata``, for decode query lengths 1 and 3. The fixed
tree must make each build exactly what it builds from the metadata the
capture is meant to leave (device offsets zeroed, host untouched); stock
0.28.0 must fail the way :data:`STOCK` records.

Not run on CPU, with the reason (also in ``docs/regression-suite.md``):
FlashInfer, Cutlass MLA, FlashInfer MLA, FlashMLA, FlashAttention MLA and
its sparse variant, HPC attention and DeepSeek-V4's ROCm builders need CUDA
or a GPU-only package; AITER MLA and AITER sparse MLA need ``aiter``;
DeepSeek-V4's sparse SWA, sparse MLA and compressor builders call
``token_to_req_indices``, whose CPU ``repeat_interleave`` rejects the zeroed
device offsets the fix keeps (CUDA does not check), so CPU cannot tell fixed
from stock; Inkling's builders launch a Triton kernel (no driver on CPU);
Dots3Note's module does not import in the 0.28.0 wheel; chunked local
attention is never captured in full graphs. With draft tokens (q=3), Kimi-K3's
ROCm KDA and DeepSeek-V3.2's indexer launch Triton kernels and Triton MLA
does not build spec-decode batches, so those run at q=1 only.

The capture loop (``capture_loop_v1``/``_v2``): vLLM's own per-KV-cache-group
loop for ROCm attention, GDN and MiniMax-M3's indexer. All scenarios run in
the two session subprocesses of ``scenario_reports``.
"""

from __future__ import annotations

from typing import Any

import pytest

from vllm_patchkit.judge.regression.by_fix.rocm_capture_host_offsets.checks import (
    INDEXER_ASSERT,
    INDEXER_FILE,
)
from vllm_patchkit.judge.regression.by_fix.rocm_capture_host_offsets.victims import (
    VICTIMS,
)
from vllm_patchkit.judge.regression.runner import TreeReport
from vllm_patchkit.judge.regression.scenarios import DECODE_QUERY_LENS, Outcome
from vllm_patchkit.judge.regression.verdict import fixed_checks

_ASSERT = "assert decode_query_len > 0"
_MM3 = "vllm/models/minimax_m3"
_SPARSE = (f"{_MM3}/common/sparse_attention.py", _ASSERT)
_DECODES_FOR_PREFILLS = {"num_decodes": [0, 4], "num_prefills": [4, 0]}

UNAFFECTED = "unaffected"
UNAVAILABLE = "unavailable"
STOCK: dict[str, dict[int, Any]] = {
    # raised: (file, source line); diverged: {field: [intended, got]} subset.
    "rocm_then_aiter_fa": {
        1: {"decode_metadata.max_query_len": [1, 0]},
        3: {"decode_metadata.max_query_len": [3, 0]},
    },
    "rocm_then_minimax_sparse": {1: _SPARSE, 3: _SPARSE},
    "rocm_then_minimax_sparse_msa": {1: _SPARSE, 3: _SPARSE},
    "rocm_then_minimax_indexer_msa": {
        q: (f"{_MM3}/nvidia/indexer_msa.py", _ASSERT) for q in (1, 3)
    },
    "rocm_then_gdn": {1: UNAFFECTED, 3: _DECODES_FOR_PREFILLS},
    "rocm_then_kimi_k3_kda": {1: UNAFFECTED, 3: _DECODES_FOR_PREFILLS},
    "rocm_then_kimi_k3_rocm_kda": {1: UNAFFECTED, 3: UNAVAILABLE},
    "rocm_then_mamba1": {1: UNAFFECTED, 3: _DECODES_FOR_PREFILLS},
    "rocm_then_mamba2": {1: UNAFFECTED, 3: UNAFFECTED},
    "rocm_then_short_conv": {1: UNAFFECTED, 3: UNAFFECTED},
    "rocm_then_linear_attn": {1: UNAFFECTED, 3: _DECODES_FOR_PREFILLS},
    "rocm_then_bailing_linear_attn": {1: UNAFFECTED, 3: UNAFFECTED},
    "rocm_then_flex_attention": {
        q: ("vllm/v1/attention/backends/flex_attention.py", None) for q in (1, 3)
    },
    "rocm_then_turboquant": {
        1: {"query_start_loc_cpu": [[0, 1, 2, 3, 4], [0] * 5]},
        3: {"num_decodes": [0, 4], "query_start_loc_cpu": [[0, 3, 6, 9, 12], [0] * 5]},
    },
    "rocm_then_flash_attn": {1: UNAFFECTED, 3: UNAFFECTED},
    "rocm_then_cross_attention": {1: UNAFFECTED, 3: UNAFFECTED},
    "rocm_then_whisper_block_pooling": {1: UNAFFECTED, 3: UNAFFECTED},
    "rocm_then_triton_mla": {1: UNAFFECTED, 3: UNAVAILABLE},
    "rocm_then_tokenspeed_mla": {1: UNAFFECTED, 3: UNAFFECTED},
    **{
        f"rocm_then_{name}": {
            1: {"req_id_per_token": [[0, 1, 2, 3], [0] * 4]},
            3: {"req_id_per_token": [[i // 3 for i in range(12)], [0] * 12]},
        }
        for name in ("flashmla_sparse", "flashinfer_mla_sparse", "xpu_mla_sparse")
    },
    "rocm_then_deepseek_v32_indexer": {1: UNAFFECTED, 3: UNAVAILABLE},
}
"""What stock 0.28.0 does to each victim. ``unaffected``: it reads the host
offsets, but a uniform decode batch builds the same with them zeroed; such a
scenario still fails on mutants of the fix (see tests/mutation)."""

VICTIM_CASES = [(v.scenario, q) for v in VICTIMS for q in DECODE_QUERY_LENS]
RUN_CASES = [(s, q) for s, q in VICTIM_CASES if STOCK[s][q] != UNAVAILABLE]


def _outcome(report: TreeReport, scenario: str, query_len: int) -> Outcome:
    assert report.report is not None
    for raw in report.report["outcomes"]:
        if raw["scenario"] == scenario and raw["decode_query_len"] == query_len:
            return Outcome(**raw)
    raise AssertionError(f"no outcome for {scenario}[q={query_len}]")


def test_stock_table_names_every_victim() -> None:
    assert STOCK.keys() == {v.scenario for v in VICTIMS}


def _skip_if_not_run(outcome: Outcome, scenario: str, query_len: int) -> None:
    """A case that could not run is a skip with its reason, never a pass; and
    only the cases the table expects may be missing."""
    if outcome.status != "unavailable":
        assert STOCK[scenario][query_len] != UNAVAILABLE, (
            f"{scenario}[q={query_len}] ran: update STOCK ({outcome})"
        )
        return
    why = (outcome.error or {}).get("message", "")
    assert STOCK[scenario][query_len] == UNAVAILABLE, f"could not run: {why}"
    pytest.skip(f"{scenario}[q={query_len}] could not run: {why}")


@pytest.mark.parametrize(("scenario", "query_len"), VICTIM_CASES)
def test_fixed_tree_builds_every_victim_as_from_intended_metadata(
    scenario_reports: dict[str, TreeReport], scenario: str, query_len: int
) -> None:
    outcome = _outcome(scenario_reports["patched"], scenario, query_len)
    _skip_if_not_run(outcome, scenario, query_len)
    assert outcome.status == "ok", outcome.error
    assert outcome.facts["diverged"] == {}
    assert all(c.passed for c in fixed_checks([outcome]))


@pytest.mark.parametrize(("scenario", "query_len"), VICTIM_CASES)
def test_stock_victim_fails_as_recorded(
    scenario_reports: dict[str, TreeReport], scenario: str, query_len: int
) -> None:
    outcome = _outcome(scenario_reports["stock"], scenario, query_len)
    _skip_if_not_run(outcome, scenario, query_len)
    expected = STOCK[scenario][query_len]
    checks = fixed_checks([outcome])
    if expected == UNAFFECTED:
        assert outcome.status == "ok" and outcome.facts["diverged"] == {}, outcome
        assert all(c.passed for c in checks)
    elif isinstance(expected, tuple):
        file, source = expected
        assert outcome.status == "raised", outcome
        assert outcome.error is not None
        assert outcome.error["relpath"] == file
        assert source is None or outcome.error["source"] == source
        assert not any(c.passed for c in checks)
    else:
        assert outcome.status == "ok", outcome.error
        diverged = outcome.facts["diverged"]
        assert {k: diverged.get(k) for k in expected} == expected, diverged
        assert not any(c.passed for c in checks)


@pytest.mark.parametrize(("scenario", "query_len"), RUN_CASES)
def test_victims_read_the_host_offsets_on_this_path(
    scenario_reports: dict[str, TreeReport], scenario: str, query_len: int
) -> None:
    """FlashAttention reads them only for AOT scheduling, which CPU never does."""
    outcome = _outcome(scenario_reports["stock"], scenario, query_len)
    assert outcome.facts["reads_host_offsets"] is (scenario != "rocm_then_flash_attn")


@pytest.mark.parametrize("loop", ["capture_loop_v1", "capture_loop_v2"])
@pytest.mark.parametrize("query_len", DECODE_QUERY_LENS)
def test_capture_loop_keeps_the_shared_host_offsets_with_the_fix(
    scenario_reports: dict[str, TreeReport], loop: str, query_len: int
) -> None:
    outcome = _outcome(scenario_reports["patched"], loop, query_len)
    facts = outcome.facts
    assert outcome.status == "ok" and facts["raised"] is None, facts
    assert facts["host_offsets_kept"], facts["host_offsets_after"]
    assert facts["host_offsets_after"] == list(range(0, 5 * query_len, query_len))
    assert facts["device_offsets_zeroed"]
    assert facts["groups_built"] == ["gdn", "indexer", "rocm"]
    assert facts["indexer_decode_query_len"] == query_len
    assert facts["gdn"]["num_decodes"] + facts["gdn"]["num_prefills"] == 4


@pytest.mark.parametrize("loop", ["capture_loop_v1", "capture_loop_v2"])
@pytest.mark.parametrize("query_len", DECODE_QUERY_LENS)
def test_stock_capture_loop_zeroes_the_shared_host_offsets_and_crashes(
    scenario_reports: dict[str, TreeReport], loop: str, query_len: int
) -> None:
    facts = _outcome(scenario_reports["stock"], loop, query_len).facts
    assert facts["host_offsets_after"] == [0] * 5
    assert not facts["host_offsets_kept"]
    assert facts["device_offsets_zeroed"]
    raised = facts["raised"]
    assert raised is not None
    assert (raised["type"], raised["relpath"]) == ("AssertionError", INDEXER_FILE)
    assert raised["source"] == INDEXER_ASSERT


@pytest.mark.parametrize("query_len", DECODE_QUERY_LENS)
def test_repeated_capture(
    scenario_reports: dict[str, TreeReport], query_len: int
) -> None:
    q = query_len
    patched = _outcome(scenario_reports["patched"], "repeated_capture", q).facts
    assert patched["host_kept"] == [True, True]
    assert patched["host_after"] == [list(range(0, 5 * q, q)), [0, q, 2 * q + 4]]
    assert patched["device_zeroed"] == [True, True]
    stock = _outcome(scenario_reports["stock"], "repeated_capture", q).facts
    assert stock["host_kept"] == [False, False]


def test_patched_report_has_no_harness_errors(
    scenario_reports: dict[str, TreeReport],
) -> None:
    for name, tree in scenario_reports.items():
        assert tree.report is not None
        errors = [o for o in tree.report["outcomes"] if o["status"] == "error"]
        assert errors == [], f"{name}: {errors}"
