"""What the mutation tier needs of each fix's file, and of each mutant.

A :class:`Target` is one vLLM file under mutation: its module, its path in
the tree, the AST check's word on a directory holding it, the tree's files
that check reads beside it, and whether the runner's warm process can leave
the module out (then its mutants are forked from it; else each runs in a
fresh interpreter). A :class:`FileMutant` names its target and makes its
source from the tree's file. The runner and the worker read only these, so
a fix's mutants join the tier by being listed here, with no branch of their
own there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vllm_overlay.fixes.rocm_aiter_unified_builder.code import AITER_UNIFIED_ATTN
from vllm_overlay.fixes.rocm_capture_host_offsets.code import (
    ROCM_ATTN,
    inspect_capture_source,
)
from vllm_overlay.fixes.static_sink_seq_lens import STATIC_SINK
from vllm_patchkit.git.invariants import check_invariant
from vllm_patchkit.judge.mutation.aiter_unified import (
    AITER_MODULE,
    PAIR_MUTANTS,
    PairMutant,
    mutate_pair,
)
from vllm_patchkit.judge.mutation.mutants import MUTANTS, Mutant, mutate
from vllm_patchkit.judge.mutation.static_sink import SINK_MUTANTS, mutate_sink


@dataclass(frozen=True)
class Target:
    key: str
    """A short name (the baseline's directory)."""
    relpath: Path
    """The file, relative to the tree."""
    shape: Callable[[Path], str]
    """The AST check on a directory laid out like a tree (the file at
    ``relpath``, the ``partners`` beside it): ``fixed`` when it calls the
    code fixed, ``unknown`` when it cannot judge, anything else when not."""
    partners: tuple[Path, ...] = ()
    """Files of the tree the AST check reads too (copied, never loaded)."""
    forks: bool = True
    """The warm process can import vLLM without this module. False when
    vLLM's configuration imports it (its package imports it): a process that
    holds the module cannot load a mutant of it (module-level side effects,
    such as a custom op, run once per process)."""

    @property
    def module(self) -> str:
        return ".".join(self.relpath.with_suffix("").parts)


def _capture_shape(directory: Path) -> str:
    file = directory / ROCM_ATTN
    return inspect_capture_source(file.read_text(), file).shape.value


def _holds(invariant: str) -> Callable[[Path], str]:
    """The fix's invariant (the one ``verify`` runs), as a shape."""

    def shape(directory: Path) -> str:
        return "fixed" if check_invariant(invariant, directory).holds else "not-fixed"

    return shape


ROCM = Target("rocm-attn", ROCM_ATTN, _capture_shape)
AITER = Target(
    "aiter-unified",
    AITER_UNIFIED_ATTN,
    _holds("rocm-aiter-unified-capture-keeps-offsets"),
    partners=(ROCM_ATTN,),
)
SINK = Target(
    "static-sink",
    STATIC_SINK,
    _holds("static-sink-keeps-shared-seq-lens"),
    forks=False,
)
TARGETS: tuple[Target, ...] = (ROCM, AITER, SINK)


@dataclass(frozen=True)
class FileMutant:
    name: str
    description: str
    target: Target
    make: Callable[[str], str]
    """The mutated source, from the tree's file at ``target.relpath``."""


def as_file_mutant(mutant: Mutant | PairMutant | FileMutant) -> FileMutant:
    """A plain :class:`Mutant` rewrites ROCM_ATTN's capture (:mod:`.mutants`);
    a pair mutant, the module it names."""
    if isinstance(mutant, FileMutant):
        return mutant
    if isinstance(mutant, PairMutant):
        target = next(t for t in TARGETS if t.module == mutant.module)
        return FileMutant(
            mutant.name,
            mutant.mutant.description,
            target,
            lambda source: mutate_pair(source, mutant),
        )
    return FileMutant(
        mutant.name, mutant.description, ROCM, lambda source: mutate(source, mutant)
    )


def _sink(mutant: Mutant) -> FileMutant:
    return FileMutant(
        mutant.name,
        mutant.description,
        SINK,
        lambda source: mutate_sink(source, mutant),
    )


TIER_PAIR_MUTANTS: tuple[PairMutant, ...] = tuple(
    m for m in PAIR_MUTANTS if m.module == AITER_MODULE
)
"""The pair mutants of ROCM_AITER_UNIFIED_ATTN's module. The pair's three
ROCM_ATTN mutants are left out: they rewrite the method :data:`MUTANTS`
already covers, into the same source as ``none_zeroed``, ``both_zeroed``
and ``seq_lens_fill_dropped`` (tests/mutation checks the equality)."""
ALL_MUTANTS: tuple[FileMutant, ...] = (
    *(as_file_mutant(m) for m in MUTANTS),
    *(as_file_mutant(m) for m in TIER_PAIR_MUTANTS),
    *(_sink(m) for m in SINK_MUTANTS),
)
