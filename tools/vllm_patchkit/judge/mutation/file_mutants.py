"""What the mutation tier needs of a fix's file, and of each mutant of it.

A :class:`Target` is one vLLM file under mutation: its module, its path in
the tree, the AST check's word on a directory holding it, the tree's files
that check reads beside it, and whether the runner's warm process can leave
the module out (then its mutants are forked from it; else each runs in a
fresh interpreter). A :class:`FileMutant` names its target and makes its
source from the tree's file. Each fix declares its own (see
:mod:`.targets`); the runner and the worker read only these types, so they
have no branch per fix.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vllm_patchkit.git.invariants import check_invariant


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


@dataclass(frozen=True)
class FileMutant:
    name: str
    description: str
    target: Target
    make: Callable[[str], str]
    """The mutated source, from the tree's file at ``target.relpath``."""


def holds(invariant: str) -> Callable[[Path], str]:
    """The fix's invariant (the one ``verify`` runs), as a target's shape."""

    def shape(directory: Path) -> str:
        return "fixed" if check_invariant(invariant, directory).holds else "not-fixed"

    return shape
