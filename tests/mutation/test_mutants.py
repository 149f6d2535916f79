"""The mutants themselves: each is a real, distinct rewrite of the fixed method.

Cheap (no vLLM import): these run in the default tier so a broken mutant
table is caught before the slow mutation tier spends minutes on it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_overlay.code import Shape
from vllm_overlay.fixes.rocm_capture_host_offsets.code import inspect_capture_source
from vllm_patchkit.judge.mutation.mutants import Mutant, MutationError
from vllm_patchkit.judge.mutation.targets import ALL_MUTANTS
from vllm_patchkit.judge.regression.by_fix.rocm_capture_host_offsets.mutants import (
    DEVICE_ZERO,
    MUTANTS,
    ROCM,
    mutate,
)
from vllm_patchkit.judge.regression.by_fix.static_sink.mutants import (
    SINK,
    SINK_MUTANTS,
)

ROCM_ATTN = ROCM.relpath
MODULE = ROCM.module
FOOL_THE_AST = {
    "device_zeroed_once",
    "max_query_len_zeroed",
    "seq_lens_fill_dropped",
    "seq_lens_zero",
    "seq_lens_fill_copy",
}
"""Mutants the AST invariant calls fixed: only the runtime scenarios catch them."""
UNPROVEN_BY_THE_AST = {"host_alias", "host_torch_fn"}
"""Mutants that zero the host offsets without naming them in a ``.zero_()``
call (an alias, ``torch.Tensor.zero_(t)``): the AST cannot prove what they
do, so it says "cannot judge" (UNKNOWN), never fixed; the runtime scenarios
catch them too."""


@pytest.fixture(scope="module")
def fixed_source(patched_installed_tree: Path) -> str:
    return (patched_installed_tree / ROCM_ATTN).read_text()


def test_fixed_source_is_fixed(fixed_source: str) -> None:
    assert inspect_capture_source(fixed_source, ROCM_ATTN).shape is Shape.FIXED


def test_each_mutant_changes_the_method_differently(fixed_source: str) -> None:
    mutated = {m.name: mutate(fixed_source, m) for m in MUTANTS}
    assert len(set(mutated.values())) == len(MUTANTS)
    assert fixed_source not in mutated.values()
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)


def test_which_mutants_fool_the_ast_invariant(fixed_source: str) -> None:
    fooled = {
        m.name
        for m in MUTANTS
        if inspect_capture_source(mutate(fixed_source, m), ROCM_ATTN).shape
        is Shape.FIXED
    }
    assert fooled == FOOL_THE_AST


def test_the_ast_cannot_judge_a_hidden_host_zeroing(fixed_source: str) -> None:
    for mutant in (m for m in MUTANTS if m.name in UNPROVEN_BY_THE_AST):
        code = inspect_capture_source(mutate(fixed_source, mutant), ROCM_ATTN)
        assert code.shape is Shape.UNKNOWN and not code.judged, mutant.name


def test_the_bug_mutant_is_the_stock_shape(fixed_source: str) -> None:
    both = next(m for m in MUTANTS if m.name == "both_zeroed")
    shape = inspect_capture_source(mutate(fixed_source, both), ROCM_ATTN).shape
    assert shape is Shape.BUGGY


def test_mutate_refuses_a_method_without_the_statement(fixed_source: str) -> None:
    stock_like = fixed_source.replace(DEVICE_ZERO, "pass")
    with pytest.raises(MutationError, match="expected one"):
        mutate(stock_like, MUTANTS[0])
    with pytest.raises(MutationError, match="no RocmAttentionMetadataBuilder"):
        mutate("x = 1\n", Mutant("m", "d", ((DEVICE_ZERO, ("pass",)),)))


def test_the_tier_runs_each_aiter_pair_mutant_and_no_duplicate(
    patched_installed_tree: Path, fixed_source: str
) -> None:
    """The pair's ROCM_ATTN mutants equal mutants the tier has; the AITER
    ones are distinct rewrites of the AITER module, all in the tier. Each of
    the three fixes' targets runs exactly its fix's mutants (another fix's
    target adds its own), and no mutant name is used twice."""
    from vllm_patchkit.judge.regression.by_fix.rocm_aiter_unified.mutants import (
        AITER,
        AITER_MODULE,
        PAIR_MUTANTS,
        TIER_PAIR_MUTANTS,
        mutate_pair,
    )

    ours = {m.name: mutate(fixed_source, m) for m in MUTANTS}
    same = {
        p.name: [n for n, text in ours.items() if text == mutate_pair(fixed_source, p)]
        for p in PAIR_MUTANTS
        if p.module == MODULE
    }
    assert same == {
        "rocm_not_zeroing": ["none_zeroed"],
        "rocm_zeroes_host": ["both_zeroed"],
        "rocm_fill_dropped": ["seq_lens_fill_dropped"],
    }
    aiter_file = patched_installed_tree / Path(*AITER_MODULE.split(".")).with_suffix(
        ".py"
    )
    aiter_source = aiter_file.read_text()
    mutated = {m.name: mutate_pair(aiter_source, m) for m in TIER_PAIR_MUTANTS}
    assert len(mutated) == 10 == len(set(mutated.values()))
    assert aiter_source not in mutated.values()
    names = [m.name for m in ALL_MUTANTS]
    assert len(names) == len(set(names))
    for target, own in (
        (ROCM, MUTANTS),
        (AITER, TIER_PAIR_MUTANTS),
        (SINK, SINK_MUTANTS),
    ):
        tier = [m.name for m in ALL_MUTANTS if m.target is target]
        assert tier == [m.name for m in own], target.key


def test_the_tier_runs_each_static_sink_mutant_against_its_file(
    patched_installed_tree: Path,
) -> None:
    """StaticSink's mutants rewrite 0004's ``build`` in the patched tree,
    each differently; the fix's invariant holds on the tree and fails on
    every mutant (a method it does not know is never called fixed)."""
    tier = [m for m in ALL_MUTANTS if m.target is SINK]
    assert [m.name for m in tier] == [m.name for m in SINK_MUTANTS]
    source = (patched_installed_tree / SINK.relpath).read_text()
    mutated = {m.name: m.make(source) for m in tier}
    assert len(set(mutated.values())) == len(tier) and source not in mutated.values()
    assert SINK.shape(patched_installed_tree) == "fixed"
    for name, text in mutated.items():
        directory = patched_installed_tree.parent / f"sink-mutant-{name}"
        (directory / SINK.relpath).parent.mkdir(parents=True, exist_ok=True)
        (directory / SINK.relpath).write_text(text)
        assert SINK.shape(directory) == "not-fixed", name
