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

Only files that mention the metadata are parsed (under two seconds for
0.28.0); a helper in a file that never names ``common_attn_metadata`` nor the
offsets would be missed, which the victim table's test would then show as a
reader no scenario covers.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

HOST_OFFSETS = "query_start_loc_cpu"
ENTRY_POINTS = ("build", "build_for_cudagraph_capture")
BASE_BUILDER = "AttentionMetadataBuilder"
METADATA_CLASS = "CommonAttentionMetadata"
_MARKERS = (HOST_OFFSETS, "MetadataBuilder", "common_attn_metadata")

Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class _Class:
    module: str
    name: str
    node: ast.ClassDef
    bases: list[str]
    methods: dict[str, Function]
    in_factory: bool


@dataclass
class _Module:
    name: str
    path: Path
    functions: dict[str, Function] = field(default_factory=dict)
    classes: dict[str, _Class] = field(default_factory=dict)
    imports: dict[str, tuple[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Reader:
    qualname: str
    """``module.Class`` (factory-made classes: the module of the factory)."""
    file: str
    line: int
    entry_points: tuple[str, ...]
    """Which of ``build`` / ``build_for_cudagraph_capture`` reach a read."""
    via: str
    """One call path to the read, for the reader's eyes."""


def _base_name(node: ast.expr) -> str:
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _parse(root: Path) -> dict[str, _Module]:
    modules: dict[str, _Module] = {}
    for path in sorted((root / "vllm").rglob("*.py")):
        text = path.read_text(errors="replace")
        if not any(marker in text for marker in _MARKERS):
            continue
        try:
            tree = ast.parse(text, filename=str(path))
        except SyntaxError:
            continue
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        module = _Module(".".join(parts), path)
        _collect(module, tree)
        modules[module.name] = module
    return modules


def _collect(module: _Module, tree: ast.Module) -> None:
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                module.imports[alias.asname or alias.name] = (node.module, alias.name)
        elif isinstance(node, Function):
            module.functions[node.name] = node

    def visit(node: ast.AST, in_factory: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                methods = {
                    item.name: item for item in child.body if isinstance(item, Function)
                }
                module.classes.setdefault(
                    child.name,
                    _Class(
                        module.name,
                        child.name,
                        child,
                        [_base_name(b) for b in child.bases],
                        methods,
                        in_factory,
                    ),
                )
                visit(child, in_factory)
            else:
                visit(child, in_factory or isinstance(child, Function))

    visit(tree, False)


class _Survey:
    def __init__(self, modules: dict[str, _Module]) -> None:
        self.modules = modules
        self.by_name: dict[str, list[_Class]] = {}
        for module in modules.values():
            for cls in module.classes.values():
                self.by_name.setdefault(cls.name, []).append(cls)
        metadata = self.by_name.get(METADATA_CLASS, [])
        # Members of the shared metadata that read the host offsets.
        self.reading_members = {
            name
            for cls in metadata
            for name, fn in cls.methods.items()
            if self._reads_directly(fn, set())
        }

    def _reads_directly(self, fn: Function, members: set[str]) -> bool:
        return any(
            isinstance(node, ast.Attribute)
            and (node.attr == HOST_OFFSETS or node.attr in members)
            for node in ast.walk(fn)
        )

    def resolve_class(self, name: str, module: str) -> _Class | None:
        mod = self.modules.get(module)
        if mod is not None:
            if name in mod.classes:
                return mod.classes[name]
            if name in mod.imports:
                source, original = mod.imports[name]
                target = self.modules.get(source)
                if target is not None and original in target.classes:
                    return target.classes[original]
        candidates = self.by_name.get(name, [])
        return candidates[0] if candidates else None

    def mro(self, cls: _Class) -> Iterator[_Class]:
        seen: set[int] = set()
        queue = [cls]
        while queue:
            current = queue.pop(0)
            if id(current) in seen:
                continue
            seen.add(id(current))
            yield current
            for base in current.bases:
                resolved = self.resolve_class(base, current.module)
                if resolved is not None:
                    queue.append(resolved)

    def is_builder(self, cls: _Class) -> bool:
        if cls.name == BASE_BUILDER:
            return False
        if any(c.name == BASE_BUILDER for c in self.mro(cls)):
            return True
        # Factory-made wrappers subclass a builder passed in at run time.
        unresolved = any(self.resolve_class(b, cls.module) is None for b in cls.bases)
        return cls.in_factory and unresolved and cls.name.endswith("Builder")

    def builders(self) -> Iterator[tuple[_Module, _Class]]:
        """Every builder class, with its module."""
        for module in self.modules.values():
            for cls in module.classes.values():
                if self.is_builder(cls):
                    yield module, cls

    def method(self, cls: _Class, name: str, skip_self: bool = False) -> _Class | None:
        for owner in self.mro(cls):
            if skip_self and owner is cls:
                continue
            if name in owner.methods:
                return owner
        return None

    def function(self, name: str, module: str) -> tuple[str, Function] | None:
        mod = self.modules.get(module)
        if mod is None:
            return None
        if name in mod.functions:
            return module, mod.functions[name]
        if name in mod.imports:
            source, original = mod.imports[name]
            target = self.modules.get(source)
            if target is not None and original in target.functions:
                return source, target.functions[original]
        return None

    def path_to_read(
        self, receiver: _Class, owner: _Class, fn: Function, seen: set[int]
    ) -> list[str] | None:
        """Call path from ``fn`` (defined on ``owner``) to a host-offset read."""
        if id(fn) in seen:
            return None
        seen.add(id(fn))
        if self._reads_directly(fn, self.reading_members):
            return [f"{owner.name}.{fn.name}"]
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            step = self._callee(receiver, owner, node.func)
            if step is None:
                continue
            next_owner, callee = step
            tail = self.path_to_read(receiver, next_owner, callee, seen)
            if tail is not None:
                return [f"{owner.name}.{fn.name}", *tail]
        return None

    def _callee(
        self, receiver: _Class, owner: _Class, func: ast.expr
    ) -> tuple[_Class, Function] | None:
        if isinstance(func, ast.Attribute):
            target = func.value
            if isinstance(target, ast.Name) and target.id in ("self", "cls"):
                found = self.method(receiver, func.attr)
            elif (
                isinstance(target, ast.Call)
                and isinstance(target.func, ast.Name)
                and target.func.id == "super"
            ):
                found = self.method(owner, func.attr, skip_self=True)
            else:
                return None
            return (found, found.methods[func.attr]) if found else None
        if isinstance(func, ast.Name):
            resolved = self.function(func.id, owner.module)
            if resolved is None:
                return None
            module, fn = resolved
            holder = _Class(
                module, module.rsplit(".", 1)[-1], owner.node, [], {}, False
            )
            return holder, fn
        return None


def builder_classes(tree: Path) -> list[tuple[_Module, _Class]]:
    """Every metadata builder class in ``tree``'s ``vllm/``, with its module,
    by the survey's rules (the audit runs each of them)."""
    return list(_Survey(_parse(tree)).builders())


def survey(tree: Path) -> list[Reader]:
    """Builders in the vLLM tree at ``tree`` whose build reads the host offsets."""
    state = _Survey(_parse(tree))
    readers = []
    for module, cls in state.builders():
        reached, via = [], ""
        for entry in ENTRY_POINTS:
            owner = state.method(cls, entry)
            if owner is None:
                continue
            path = state.path_to_read(cls, owner, owner.methods[entry], set())
            if path is not None:
                reached.append(entry)
                via = via or " -> ".join(path)
        if reached:
            readers.append(
                Reader(
                    f"{module.name}.{cls.name}",
                    str(module.path.relative_to(tree)),
                    cls.node.lineno,
                    tuple(reached),
                    via,
                )
            )
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
