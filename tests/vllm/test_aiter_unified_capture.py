"""The pair of ROCm capture builders (#53821), on real vLLM code on CPU.

Stock 0.28.0 hands ROCM_AITER_UNIFIED_ATTN the generic ROCm builder: its
capture zeroes the runner's persistent device offsets, the very buffer the
AITER metadata (and so a captured graph) reads. With the series, and on
0.29.0, the AITER capture keeps both offsets while ROCM_ATTN's still zeroes
the device ones; every wrong combination (the mutants) is caught.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from vllm_overlay.fixes import by_name
from vllm_patchkit.judge.regression.by_fix.rocm_aiter_unified import (
    AITER_CAPTURE,
    AITER_LOOP,
    ROCM_CAPTURE,
)
from vllm_patchkit.judge.regression.by_fix.rocm_aiter_unified.mutants import (
    PAIR_MUTANTS,
)
from vllm_patchkit.judge.regression.runner import TreeReport
from vllm_patchkit.trees.releases import release_tree
from vllm_patchkit.trees.tree_process import TreeLauncher


def _run(tree: Path | None, *command: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, *command],
        env=TreeLauncher.of(tree).env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    lines = proc.stdout.strip().splitlines()
    assert lines, proc.stderr[-3000:]
    return json.loads(lines[-1])


def test_stock_0_28_zeroes_the_offsets_the_aiter_graph_reads(
    scenario_reports: dict[str, TreeReport],
) -> None:
    """Read from the suite's run on the venv's stock 0.28.0, which runs every
    registered scenario (the victim tests read the same run)."""
    report = scenario_reports["stock"].report
    assert report is not None
    by_name = {(o["scenario"], o["decode_query_len"]): o for o in report["outcomes"]}
    for query_len in (1, 3):
        aiter = by_name[(AITER_CAPTURE, query_len)]["facts"]
        assert aiter["builder"] == "RocmAttentionMetadataBuilder"
        assert aiter["device_zeroed"] and not aiter["device_unchanged"]
        assert aiter["metadata_uses_shared_buffers"]
        loop = by_name[(AITER_LOOP, query_len)]["facts"]
        # vLLM's own runner loop: its persistent device buffer is left all
        # zero, and the AITER metadata points at that buffer.
        assert loop["runner_device_after"] == [0] * 5
        assert loop["metadata_reads_runner_buffer"]
        rocm = by_name[(ROCM_CAPTURE, query_len)]["facts"]
        assert rocm["device_zeroed"] and not rocm["host_unchanged"]
    # Every check of the pair ran and failed: none was skipped or errored.
    checks = [c for c in report["checks"] if c["fix"] == AITER_FIX.pr]
    assert checks
    assert all(c["status"] == "failed" for c in checks), checks


AITER_FIX = by_name("rocm-aiter-unified-capture-keeps-offsets")

PAIR_MUTANTS_MODULE = "vllm_patchkit.judge.regression.by_fix.rocm_aiter_unified.mutants"


def _assert_fixed_and_mutants_killed(tree: Path) -> None:
    report = _run(tree, "-m", PAIR_MUTANTS_MODULE, "--json")
    assert report["baseline_failing"] == []
    assert [m["name"] for m in report["mutants"]] == [m.name for m in PAIR_MUTANTS]
    survivors = [m["name"] for m in report["mutants"] if not m["killed"]]
    assert survivors == []


def test_patched_0_28_keeps_aiter_offsets_and_kills_every_mutant(
    patched_installed_tree: Path,
) -> None:
    _assert_fixed_and_mutants_killed(patched_installed_tree)


@pytest.mark.slow
@pytest.mark.release_trees
def test_0_29_keeps_aiter_offsets_and_kills_every_mutant() -> None:
    _assert_fixed_and_mutants_killed(release_tree("0.29.0"))
