"""Patches 0004 and 0005 (StaticSink keeps the shared seq_lens) on real trees.

0004's invariant must fail on stock 0.33.0 and hold once ``apply`` has put
the series on a 0.33.0 source checkout (tag, no ``_version.py``); 0005, the
test for vLLM's tree, must fail on the stock code and pass with 0004; the
audit must find the bug on stock 0.33.0 and nothing harmful in the static
sink builder once 0004 is in.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.audit.test_reproductions import reproduce
from tests.toolkit.cli_helpers import patchkit_json
from vllm_patchkit.git.invariants import check_invariant
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.judge.audit.draft_update import RULE
from vllm_patchkit.trees.releases import release_tree

pytestmark = pytest.mark.release_trees

INVARIANT = "static-sink-keeps-shared-seq-lens"
TEST_INVARIANT = "static-sink-regression-test-present"
FIX = "0004-Bugfix-Keep-the-shared-seq_lens-in-StaticSinkAttenti.patch"
TEST = "0005-Bugfix-Test-that-static-sink-attention-keeps-the-sha.patch"
TREE_TEST = "tests/v1/attention/test_static_sink_shared_state.py"
SINK_FILE = "vllm/model_executor/layers/attention/static_sink_attention.py"


@pytest.fixture
def patched_0_33(release_clone: Callable[[str], Path]) -> Path:
    """A 0.33.0 source checkout with the series applied by ``apply``."""
    tree = release_clone("0.33.0")
    assert not (tree / "vllm" / "_version.py").exists()
    assert not check_invariant(INVARIANT, tree).holds
    assert not check_invariant(TEST_INVARIANT, tree).holds

    code, result = patchkit_json("apply", str(tree))

    assert (code, result["status"]) == (0, "applied"), result
    statuses = {p["name"]: p["status"] for p in result["patches"]}
    assert statuses[FIX] == statuses[TEST] == "applied", statuses
    return tree


def test_check_on_stock_0_33_says_0004_and_0005_are_carried(
    release_clone: Callable[[str], Path],
) -> None:
    tree = release_clone("0.33.0")

    code, result = patchkit_json("check", str(tree))

    statuses = {p["name"]: p["status"] for p in result["patches"]}
    assert code == 0, result
    assert statuses[FIX] == statuses[TEST] == "applies", statuses
    stock = check_invariant(INVARIANT, tree)
    assert not stock.holds and stock.file == tree / SINK_FILE


@pytest.mark.slow  # two runs of 0005 in the tree's runtime
def test_apply_on_0_33_checkout_makes_the_invariants_hold_and_0005_pass(
    patched_0_33: Path,
) -> None:
    assert check_invariant(INVARIANT, patched_0_33).holds
    assert check_invariant(TEST_INVARIANT, patched_0_33).holds

    fixed = reproduce(patched_0_33, patched_0_33 / TREE_TEST, "--noconftest")
    assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-3000:]
    # Triton's and ROCm Octave's cases run on the CPU; FlashAttention's
    # (0006's among them) need CUDA.
    assert "6 passed, 4 skipped" in fixed.stdout

    # The tests on the stock 0.33.0 code: every case that runs fails, with
    # the figures.
    git = Git(patched_0_33)
    git.run("checkout", "v0.33.0", "--", "vllm")
    try:
        stock = reproduce(patched_0_33, patched_0_33 / TREE_TEST, "--noconftest")
    finally:
        git.run("checkout", "HEAD", "--", "vllm")
    assert stock.returncode == 1, stock.stdout[-3000:] + stock.stderr[-3000:]
    assert "6 failed, 4 skipped" in stock.stdout
    # The second group sees the sink twice; capture's copy overruns.
    assert "group 1 sees [104, 81, 128, 0]" in stock.stdout
    assert "expanded size of the tensor (63) must match" in stock.stdout
    assert git.is_clean()


DRAFT_RULE_ELSEWHERE = {
    ("draft-update-stale-lengths", "ChunkedLocalAttentionBuilder"),
    ("draft-update-stale-lengths", "WhisperCausalAttentionWithBlockPoolingBuilder"),
}
"""0.33.0's draft-update findings outside the static-sink file: upstream
wrappers that keep their own lengths (docs/audit.md), not 0004's."""


def _findings(tree: Path) -> tuple[int, list[dict[str, Any]]]:
    code, result = patchkit_json("audit", str(tree))
    assert isinstance(result, dict), result
    return code, result["findings"]


def _sink(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in findings if f["file"] == SINK_FILE]


@pytest.mark.slow  # two audits, each with its dynamic pass
def test_audit_finds_the_bug_on_stock_0_33_and_nothing_harmful_with_0004(
    patched_0_33: Path,
) -> None:
    code, findings = _findings(release_tree("0.33.0"))
    stock = _sink(findings)
    assert code == 1
    assert {f["kind"] for f in stock} == {"harmful"}, json.dumps(stock)
    assert {f["field"] for f in stock} >= {"seq_lens", "max_seq_len"}

    code, findings = _findings(patched_0_33)
    fixed = _sink(findings)
    assert [f for f in fixed if f["kind"] == "harmful"] == [], json.dumps(fixed)
    # What is left harmful is upstream's, not 0004's: #25985's device zeroing,
    # which ROCm's segmented backend inherits and reads (tests/audit/
    # test_reach.py), and wrappers that keep their own draft lengths.
    harmful = [f for f in findings if f["kind"] == "harmful"]
    zeroing = [(f["field"], f["victims"]) for f in harmful if f["operation"] != RULE]
    assert zeroing == [("query_start_loc", ["ROCM_SEGMENTED_ATTN"])], zeroing
    draft = {
        (f["operation"], f["method"].partition(".")[0])
        for f in harmful
        if f["operation"] == RULE
    }
    assert draft <= DRAFT_RULE_ELSEWHERE, draft
    assert code == 1
