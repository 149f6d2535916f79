"""Patch 0003 (#53821's backport) on real release trees: apply, check, tests.

0003 gives ROCM_AITER_UNIFIED_ATTN a capture builder of its own. Its
invariant must fail on stock 0.28.0, hold once the series is in, and hold on
0.29.0 and later, where upstream carries the change (so the toolkit reports
0003 as upstreamed there). Its test for vLLM's tree must fail on the stock
code and pass with the series.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.toolkit.cli_helpers import patchkit_json
from tests.toolkit.series_expectations import (
    APPLIED,
    NOT_CARRIED,
    applied_statuses,
    carried,
    stock_status,
)
from vllm_overlay.fixes import FIXES
from vllm_patchkit.git.invariants import check_invariant
from vllm_patchkit.git.series import Series
from vllm_patchkit.gitcmd import Git
from vllm_patchkit.judge.regression.by_fix.rocm_aiter_unified.mutants import (
    PAIR_MUTANTS,
    mutate_pair,
)
from vllm_patchkit.judge.tree_pytest import run_tree_tests

pytestmark = pytest.mark.release_trees

INVARIANT = "rocm-aiter-unified-capture-keeps-offsets"
FIX = "0003-Bugfix-ROCm-Preserve-AITER-unified-attention-metadat.patch"
TREE_TEST = "tests/v1/attention/test_rocm_aiter_unified_attn_cudagraph_capture.py"
FILES = {
    "vllm.v1.attention.backends.rocm_attn": "vllm/v1/attention/backends/rocm_attn.py",
    "vllm.v1.attention.backends.rocm_aiter_unified_attn": (
        "vllm/v1/attention/backends/rocm_aiter_unified_attn.py"
    ),
}


def test_the_series_declares_0003(series: Series) -> None:
    patch = next(p for p in series.patches if p.name == FIX)
    assert patch.invariant == INVARIANT
    assert patch.trailer("Applied-Upstream") == "0.29.0, vllm-project/vllm#53821"
    assert patch.trailer("Origin") == "backport, vllm-project/vllm#53821"
    assert TREE_TEST in patch.files


@pytest.fixture
def patched_0_28(release_clone: Callable[[str], Path]) -> Path:
    tree = release_clone("0.28.0")
    stock = check_invariant(INVARIANT, tree)
    assert not stock.holds
    assert "hands out RocmAttentionMetadataBuilder" in stock.detail

    code, result = patchkit_json("apply", str(tree))

    assert (code, result["status"]) == (0, "applied"), result
    statuses = {p["name"]: p["status"] for p in result["patches"]}
    assert list(statuses.values()) == applied_statuses("0.28.0")
    assert statuses[FIX] == APPLIED  # by hand
    assert check_invariant(INVARIANT, tree).holds
    return tree


@pytest.mark.slow
def test_0003_applies_on_0_28_and_its_tree_test_tells_stock_from_fixed(
    patched_0_28: Path,
) -> None:
    git = Git(patched_0_28)
    fixed = run_tree_tests(patched_0_28, [TREE_TEST])
    assert fixed is not None and fixed.ok, fixed and fixed.output[-2000:]
    assert (fixed.passed, fixed.failed) == (5, 0)

    # The stock 0.28.0 code under the same test file: every case fails.
    git.run("checkout", "v0.28.0", "--", "vllm")
    try:
        stock = run_tree_tests(patched_0_28, [TREE_TEST])
    finally:
        git.run("checkout", "HEAD", "--", "vllm")
    assert stock is not None and stock.ran
    assert (stock.passed, stock.failed) == (0, 5), stock.output[-2000:]
    assert git.is_clean()


@pytest.mark.parametrize("version", ["0.29.0", "0.33.0"])
def test_0003_is_upstreamed_from_0_29(
    release_clone: Callable[[str], Path], version: str
) -> None:
    tree = release_clone(version)
    result = check_invariant(INVARIANT, tree)
    assert result.holds, result.detail

    code, checked = patchkit_json("check", str(tree))
    assert code == 0
    statuses = {p["name"]: p["status"] for p in checked["patches"]}
    assert statuses[FIX] == "upstreamed"

    code, applied = patchkit_json("apply", str(tree))
    assert code == 0, applied
    statuses = {p["name"]: p["status"] for p in applied["patches"]}
    assert statuses[FIX] == "upstreamed"
    applied_names = [n[:4] for n, s in statuses.items() if s == APPLIED]
    assert applied_names == [p.name[:4] for p in carried(version)]
    # By hand: the tests and the static sink, not the upstreamed fixes.
    assert {"0002", "0004", "0005"} <= set(applied_names)
    assert not {"0001", "0003"} & set(applied_names)


def test_the_invariant_sees_the_wrong_combinations(
    patched_0_28: Path, tmp_path: Path
) -> None:
    """Each mutant of the pair, written into a copy of the two modules."""
    held = []
    for target in PAIR_MUTANTS:
        copy = tmp_path / target.name
        for relpath in FILES.values():
            (copy / relpath).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(patched_0_28 / relpath, copy / relpath)
        module = copy / FILES[target.module]
        module.write_text(mutate_pair(module.read_text(), target))
        if check_invariant(INVARIANT, copy).holds:
            held.append(target.name)
    # Only the dropped ROCM_ATTN fill escapes the AST check (it does not read
    # the ROCm fill); the regression scenarios kill it.
    assert held == ["rocm_fill_dropped"]


@pytest.mark.parametrize(
    ("version", "pinned"),
    [
        # 0004 (Affects: 0.14.0..0.33.0): no static-sink builder yet.
        ("0.11.0", {"#51585": False, "#53821": False, "StaticSink": False}),
        ("0.25.0", {"#51585": True, "#53821": False, "StaticSink": True}),
        ("0.28.0", {"#51585": True, "#53821": True, "StaticSink": True}),
        # Upstream carries both from 0.29.0 (Applied-Upstream): both count.
        ("0.29.0", {"#51585": True, "#53821": True, "StaticSink": True}),
    ],
)
def test_which_fixes_decide_a_trees_verdict(
    series: Series, version: str, pinned: dict[str, bool]
) -> None:
    """A fix decides the verdict unless the series' trailers say its first
    patch is not carried for the release (a fix added to the series moves
    the expectation with it); ``pinned``, by hand, whether #51585, #53821
    and StaticSink each count there."""
    from vllm_patchkit.judge.verify import fixes_not_counted
    from vllm_patchkit.trees.releases import release_tree

    expected = {
        fix.pr: f"not carried for {version}"
        for fix in FIXES
        if stock_status(series.of_fix(fix)[0], version) == NOT_CARRIED
    }
    not_counted = fixes_not_counted(series, release_tree(version))
    assert not_counted == expected
    assert {pr: pr not in not_counted for pr in pinned} == pinned
