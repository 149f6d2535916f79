"""The victim table is complete: every reader of the host offsets is accounted for.

The static survey (:mod:`vllm_patchkit.judge.regression.survey`) lists the builders
of a tree whose ``build`` or capture reaches ``query_start_loc_cpu``. On the
installed vLLM each must be a scenario, not run for a stated reason, or
covered by another scenario; a new reader in a later release fails here
until someone decides which. The survey also sees the fix itself: with the
series applied, the ROCm builder no longer touches the host offsets.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_patchkit.judge.regression.by_fix.rocm_capture_host_offsets.victims import (
    COVERED_ELSEWHERE,
    NOT_RUN,
    VICTIMS,
)
from vllm_patchkit.judge.regression.survey import survey
from vllm_patchkit.paths import PROJECT_ROOT
from vllm_patchkit.trees.installed import installed_vllm_dir

ROCM = "vllm.v1.attention.backends.rocm_attn.RocmAttentionMetadataBuilder"
DOC = PROJECT_ROOT / "docs" / "regression-suite.md"


@pytest.fixture(scope="module")
def installed_readers() -> dict[str, str]:
    return {r.qualname: r.via for r in survey(installed_vllm_dir().parent)}


def test_every_reader_is_run_or_has_a_reason(installed_readers: dict[str, str]) -> None:
    accounted = (
        {v.qualname for v in VICTIMS} | NOT_RUN.keys() | COVERED_ELSEWHERE.keys()
    )
    assert sorted(installed_readers.keys() - accounted) == []
    assert sorted(accounted - installed_readers.keys()) == []


def test_survey_follows_helpers_and_inheritance(
    installed_readers: dict[str, str],
) -> None:
    linear = "vllm.v1.attention.backends.linear_attn.LinearAttentionMetadataBuilder"
    assert installed_readers[linear].endswith("utils.split_decodes_and_prefills")
    mamba2 = "vllm.v1.attention.backends.mamba2_attn.Mamba2AttentionMetadataBuilder"
    assert "_compute_common_metadata" in installed_readers[mamba2]
    cross = "vllm.model_executor.layers.attention.cross_attention.CrossAttentionBuilder"
    assert cross in installed_readers  # made by a factory around any backend
    assert installed_readers[ROCM] == (
        "RocmAttentionMetadataBuilder.build_for_cudagraph_capture"
    )
    assert not any("TritonAttentionMetadataBuilder" in q for q in installed_readers)


def test_fixed_rocm_builder_no_longer_touches_host_offsets(
    patched_installed_tree: Path,
) -> None:
    readers = {r.qualname for r in survey(patched_installed_tree)}
    assert ROCM not in readers
    assert "vllm.models.minimax_m3.common.indexer." in " ".join(readers)


def test_doc_lists_every_builder_not_run() -> None:
    text = DOC.read_text()
    missing = [q for q in NOT_RUN if q.rsplit(".", 1)[1] not in text]
    assert missing == []
