"""Which metadata builders of a vLLM tree read the shared host offsets.

A static survey over the tree's source (nothing is imported): for every
``AttentionMetadataBuilder`` subclass, does ``build`` or
``build_for_cudagraph_capture`` reach a read of ``query_start_loc_cpu``?
Reads count directly, through ``self``/``super()`` methods (resolved on the
builder's own class, as Python dispatches them), through module functions
(``split_decodes_and_prefills`` and friends), and through the
``CommonAttentionMetadata`` members that read it (``num_computed_tokens_cpu``,
``token_to_req_indices``, ...). Builders made inside factory functions
(``CrossAttentionBuilder`` wraps whatever backend it is given) count too.

Names resolve through the static audit's index of the tree
(:class:`vllm_patchkit.judge.audit.source.SourceIndex`). Builders are looked
for only in files that mention the metadata; a builder in a file that names
neither ``common_attn_metadata``, the offsets nor a ``MetadataBuilder`` would
be missed, which the victim table's test would then show.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from vllm_patchkit.judge.audit.source import (
    METADATA_CLASS,
    ClassRef,
    Module,
    SourceIndex,
)

HOST_OFFSETS = "query_start_loc_cpu"
ENTRY_POINTS = ("build", "build_for_cudagraph_capture")
BASE_BUILDER = "AttentionMetadataBuilder"
_MARKERS = (HOST_OFFSETS, "MetadataBuilder", "common_attn_metadata")

Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Builder:
    """One metadata builder class found in a tree's source."""

    qualname: str
    """``module.Class`` (factory-made: the factory's module)."""
    module: str
    name: str
    file: str
    line: int
    in_factory: bool


@dataclass(frozen=True)
class Reader:
    qualname: str
    """``module.Class`` (factory-made classes: the module of the factory)."""
    file: str
    line: int
    via: str
    """One call path to the read (from ``build``, else from
    ``build_for_cudagraph_capture``), for the reader's eyes."""


def _reads_directly(fn: Function, members: set[str]) -> bool:
    return any(
        isinstance(node, ast.Attribute)
        and (node.attr == HOST_OFFSETS or node.attr in members)
        for node in ast.walk(fn)
    )


def _in_functions(tree: ast.Module) -> set[ast.ClassDef]:
    """Classes defined inside a function (a factory) of ``tree``."""
    return {
        node
        for fn in ast.walk(tree)
        if isinstance(fn, Function)
        for node in ast.walk(fn)
        if isinstance(node, ast.ClassDef)
    }


class _Survey:
    def __init__(self, tree: Path) -> None:
        self.index = SourceIndex(tree)
        # Members of the shared metadata that read the host offsets.
        self.reading_members = {
            node.name
            for cls in self.index.classes_named(METADATA_CLASS)
            for node in cls.node.body
            if isinstance(node, Function) and _reads_directly(node, set())
        }

    def builders(self) -> Iterator[tuple[Builder, ClassRef]]:
        """Every builder class in a file that mentions the metadata."""
        mentions = self.index.mentioning(_MARKERS)
        for module in mentions:
            in_factory = _in_functions(module.tree)
            for node in module.classes.values():
                cls = ClassRef(module, node)
                if self.is_builder(cls, node in in_factory):
                    builder = Builder(
                        f"{module.name}.{node.name}",
                        module.name,
                        node.name,
                        module.path,
                        node.lineno,
                        node in in_factory,
                    )
                    yield builder, cls

    def is_builder(self, cls: ClassRef, in_factory: bool) -> bool:
        if cls.name == BASE_BUILDER:
            return False
        if any(c.name == BASE_BUILDER for c in self.index.mro(cls)):
            return True
        # Factory-made wrappers subclass a builder passed in at run time.
        unresolved = len(self.index.bases(cls)) < len(cls.node.bases)
        return in_factory and unresolved and cls.name.endswith("Builder")

    def path_to_read(
        self,
        receiver: ClassRef,
        owner: ClassRef | None,
        module: Module,
        fn: Function,
        seen: set[int],
    ) -> list[str] | None:
        """Call path from ``fn`` (defined on ``owner``, or a function of
        ``module``) to a host-offset read."""
        if id(fn) in seen:
            return None
        seen.add(id(fn))
        holder = owner.name if owner else module.name.rsplit(".", 1)[-1]
        step = f"{holder}.{fn.name}"
        if _reads_directly(fn, self.reading_members):
            return [step]
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            callee = self._callee(receiver, owner, module, node.func)
            if callee is None:
                continue
            tail = self.path_to_read(receiver, *callee, seen)
            if tail is not None:
                return [step, *tail]
        return None

    def _callee(
        self, receiver: ClassRef, owner: ClassRef | None, module: Module, func: ast.expr
    ) -> tuple[ClassRef | None, Module, Function] | None:
        """What a call resolves to: ``self``/``cls`` methods on the builder's
        own class, ``super()`` after the method's owner, module functions."""
        if isinstance(func, ast.Name):
            resolved = self.index.resolve_function(module, func.id)
            return (None, *resolved) if resolved else None
        if not isinstance(func, ast.Attribute):
            return None
        target = func.value
        if isinstance(target, ast.Name) and target.id in ("self", "cls"):
            found = self.index.find_method(receiver, func.attr)
        elif (
            owner is not None
            and isinstance(target, ast.Call)
            and isinstance(target.func, ast.Name)
            and target.func.id == "super"
        ):
            found = self.index.find_method(owner, func.attr, after=owner)
        else:
            return None
        return (found[0], found[0].module, found[1]) if found else None


def builder_classes(tree: Path) -> list[Builder]:
    """Every metadata builder class in ``tree``'s ``vllm/``, by the survey's
    rules (the audit runs each of them)."""
    return sorted((b for b, _ in _Survey(tree).builders()), key=lambda b: b.qualname)


def survey(tree: Path) -> list[Reader]:
    """Builders in the vLLM tree at ``tree`` whose build reads the host offsets."""
    state = _Survey(tree)
    readers = []
    for builder, cls in state.builders():
        for entry in ENTRY_POINTS:
            found = state.index.find_method(cls, entry)
            if found is None:
                continue
            owner, fn = found
            path = state.path_to_read(cls, owner, owner.module, fn, set())
            if path is not None:
                via = " -> ".join(path)
                readers.append(
                    Reader(builder.qualname, builder.file, builder.line, via)
                )
                break
    return sorted(readers, key=lambda r: r.qualname)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m vllm_patchkit.judge.regression.survey", description=__doc__
    )
    parser.add_argument("tree", type=Path, help="a directory holding vllm/")
    args = parser.parse_args(argv)
    for reader in survey(args.tree):
        print(f"{reader.qualname}\n    {reader.file}:{reader.line}  via {reader.via}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
