"""The static pass: find builder code that writes shared metadata state, by reading it.

For every class of the tree with a builder's ``build`` or
``build_for_cudagraph_capture`` (its own or inherited), this follows the
``CommonAttentionMetadata`` parameter through the method and the tree's code
it calls, a few levels deep, and reports each statement that writes one of
its fields in place or reassigns it (what counts as a write: docs/audit.md,
"Static pass"). The walk of one function is
:mod:`vllm_overlay.metadata_writes`, the one analysis the overlay's
classifiers and the invariants read too; this pass adds the calls it follows
through the tree. Nothing is imported; the tree may be any release or a
checkout.
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from vllm_overlay.metadata_writes import EMPTY, META, Taints, Walker, Write, dotted
from vllm_patchkit.judge.audit.bands import Band, intentional
from vllm_patchkit.judge.audit.reach import Reach, band_reach, returned_class
from vllm_patchkit.judge.audit.source import ClassRef, Module, SourceIndex

ENTRY_METHODS = ("build", "build_for_cudagraph_capture")
MAX_DEPTH = 4
"""Calls followed below an entry method: build -> helper -> helper -> ..."""
MUTABLE_HINTS = ("Tensor", "ndarray", "dict", "list", "np.", "torch.")


@dataclass
class StaticWrite:
    """One statement that writes a shared field, and the entries that reach it."""

    file: str
    line: int
    field: str
    method: str
    operation: str
    via: list[str] = field(default_factory=list)


@dataclass
class StaticResult:
    writes: list[StaticWrite]
    metadata_class: str | None  # file of CommonAttentionMetadata, None if absent
    fields: list[str]
    builders: list[str]  # Class names whose entry methods were analysed
    not_read: dict[str, str] = field(default_factory=dict)
    """Modules not read or not parsed (path relative to the tree -> why):
    their writes are unseen, so a verdict that needs them cannot be given."""
    reach: dict[tuple[str, int, str], Reach] = field(default_factory=dict)
    """(file, line, field) of each band-aid write -> whom it reaches."""


def analyse_tree(root: Path, files: Collection[str] | None = None) -> StaticResult:
    """Every builder of the tree, or (``files``: paths relative to ``root``)
    the builders those files define, build on or hand out: a pre-commit
    hook's scope, read in about a second."""
    index = SourceIndex(root)
    meta_ref, names = index.metadata_fields()
    pass_ = _Pass(index, names, meta_ref)
    builders: set[str] = set()
    classes = _all_classes(index) if files is None else _classes_for(index, files)
    for cls in classes:
        walked = [pass_.enter(cls, entry) for entry in ENTRY_METHODS]  # each one
        if any(returns is not None for returns in walked):
            builders.add(cls.name)
    reach = _reach(index, pass_)
    return StaticResult(
        writes=sorted(pass_.writes.values(), key=lambda w: (w.file, w.line, w.field)),
        metadata_class=meta_ref.module.path if meta_ref else None,
        fields=sorted(names),
        builders=sorted(builders),
        not_read=index.not_read,
        reach=reach,
    )


def _all_classes(index: SourceIndex) -> list[ClassRef]:
    # A builder class defines an entry method or inherits one: its module
    # names a builder (the text test only spares parsing the other modules).
    return [
        ClassRef(module, node)
        for module in index.modules_where(
            lambda text: "Builder" in text or "def build" in text
        )
        for node in module.classes.values()
    ]


def _classes_for(index: SourceIndex, files: Collection[str]) -> list[ClassRef]:
    """The classes ``files`` define, the classes anywhere that build on them
    (subclasses inherit their writes), and the builders their backends hand
    out (a backend that hands out another's builder runs its writes)."""
    wanted = set(files)
    changed = [
        module
        for name, path in index.paths.items()
        if path in wanted and (module := index.module(name)) is not None
    ]
    found = {id(n): ClassRef(m, n) for m in changed for n in m.classes.values()}
    own = set(found)
    names = tuple({n for m in changed for n in m.classes})
    if names:
        for module in index.mentioning(names):
            for node in module.classes.values():
                cls = ClassRef(module, node)
                if any(id(c.node) in own for c in index.mro(cls)):
                    found.setdefault(id(node), cls)
    for cls in [found[key] for key in own]:
        hit = index.find_method(cls, "get_builder_cls")
        builder = returned_class(index, *hit) if hit is not None else None
        if builder is not None:
            found.setdefault(id(builder.node), builder)
    return list(found.values())


def _reach(index: SourceIndex, pass_: _Pass) -> dict[tuple[str, int, str], Reach]:
    """Whom each band-aid the pass found reaches (:mod:`.reach`)."""

    def returns_of(cls: ClassRef, method: str) -> Taints:
        return pass_.enter(cls, method) or EMPTY

    by_band: dict[Band, Reach] = {}
    reach = {}
    for write in list(pass_.writes.values()):
        band = intentional(write)
        if band is None or not band.guards:
            continue
        if band not in by_band:
            by_band[band] = band_reach(index, band, returns_of)
        reach[(write.file, write.line, write.field)] = by_band[band]
    return reach


def _mutable_fields(ref: ClassRef) -> set[str]:
    """Fields whose value can change in place (tensors, arrays, containers)."""
    found = set()
    for node in ref.node.body:
        annotation = None
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            annotation, name = node.annotation, node.target.id
        elif isinstance(node, ast.FunctionDef) and node.returns is not None:
            annotation, name = node.returns, node.name
        if annotation is not None and any(
            h in ast.unparse(annotation) for h in MUTABLE_HINTS
        ):
            found.add(name)
    return found


def _bind_meta_params(func: ast.FunctionDef) -> dict[str, Taints]:
    """The parameters that take the metadata: by annotation, else by name."""
    args = [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]
    return {
        a.arg: frozenset({META})
        for a in args
        if a.arg in ("common_attn_metadata", "common_metadata")
        or (a.annotation and "CommonAttentionMetadata" in ast.unparse(a.annotation))
    }


class _Pass:
    """Shared state of one tree's analysis: the index, the fields, the writes."""

    def __init__(
        self, index: SourceIndex, fields: set[str], meta_ref: ClassRef | None
    ) -> None:
        self.index = index
        self.meta_ref = meta_ref
        self.fields = fields
        self.mutable = _mutable_fields(meta_ref) if meta_ref else set()
        self.writes: dict[tuple[str, int, str, str], StaticWrite] = {}
        self._memo: dict[tuple, tuple[Taints, set[tuple]]] = {}
        self._producing: list[set[tuple]] = []
        self._active: set[tuple] = set()

    def record(
        self, module: Module, line: int, fld: str, method: str, op: str, via: str
    ) -> None:
        key = (module.path, line, fld, op)
        write = self.writes.get(key)
        if write is None:
            write = self.writes[key] = StaticWrite(module.path, line, fld, method, op)
        if via not in write.via:
            write.via.append(via)
        for produced in self._producing:
            produced.add(key)

    def enter(self, cls: ClassRef, method: str) -> Taints | None:
        """Walk ``cls.method`` from its metadata parameters; what it returns,
        None when it has no such method or no such parameter."""
        found = self.index.find_method(cls, method)
        params = _bind_meta_params(found[1]) if found is not None else {}
        if found is None or not params:
            return None
        via = f"{cls.name}.{method}"
        return self.analyse(cls, found[0], found[1], params, depth=0, via=via)

    def analyse(
        self,
        self_cls: ClassRef | None,
        owner: ClassRef | None,
        func: ast.FunctionDef,
        params: dict[str, Taints],
        depth: int,
        via: str,
    ) -> Taints:
        """Walk ``func`` with ``params`` tainted, recording writes; what it returns."""
        key = (
            id(func),
            id(self_cls.node) if self_cls else None,
            tuple(sorted((k, tuple(sorted(v))) for k, v in params.items())),
        )
        if key in self._active:
            return EMPTY
        if key in self._memo:
            # Its writes were recorded on the first walk; this entry reaches them too.
            result, produced = self._memo[key]
            for write_key in produced:
                if via not in self.writes[write_key].via:
                    self.writes[write_key].via.append(via)
            return result
        self._active.add(key)
        self._producing.append(set())
        module = owner.module if owner else self._module_of(func)
        walker = _TreeWalker(self, self_cls, owner, module, func, params, depth, via)
        walker.run()
        self._active.discard(key)
        produced = self._producing.pop()
        for outer in self._producing:
            outer |= produced
        self._memo[key] = (frozenset(walker.returns), produced)
        return self._memo[key][0]

    def _module_of(self, func: ast.FunctionDef) -> Module:
        for module in self.index._parsed.values():
            if module is not None and module.functions.get(func.name) is func:
                return module
        raise LookupError(func.name)


class _TreeWalker(Walker):
    """The one walk of metadata writes (:class:`vllm_overlay.metadata_writes.Walker`),
    following calls into the tree: constructors, ``self``/``super()`` methods,
    module functions, ``self.x`` slots of the builder."""

    def __init__(
        self,
        pass_: _Pass,
        self_cls: ClassRef | None,
        owner: ClassRef | None,
        module: Module,
        func: ast.FunctionDef,
        params: dict[str, Taints],
        depth: int,
        via: str,
    ) -> None:
        super().__init__(func, params, pass_.fields, pass_.mutable)
        self.p = pass_
        self.self_cls = self_cls
        self.owner = owner
        self.module = module
        self.depth = depth
        self.via = via
        self.method = f"{owner.name}.{func.name}" if owner else func.name

    def record(self, write: Write) -> None:
        self.p.record(
            self.module, write.line, write.field, self.method, write.op, self.via
        )

    def own_cache(self, target: ast.Attribute) -> bool:
        """The metadata class setting a private slot of its own (a memo cache)."""
        return (
            self.p.meta_ref is not None
            and self.owner is not None
            and self.owner.node is self.p.meta_ref.node
            and target.attr.startswith("_")
        )

    def self_key(self, node: ast.Attribute) -> str | None:
        if self.self_cls is None:
            return None  # a function, or a method of the metadata class itself
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            return f"self.{node.attr}"
        return None

    def follow(
        self,
        node: ast.Call,
        args: list[Taints],
        kwargs: dict[str | None, Taints],
        receiver: Taints,
    ) -> Taints:
        """Calls into the tree: constructors, self/super methods, module functions."""
        func = node.func
        target: tuple[ClassRef | None, ast.FunctionDef] | None = None
        bound = False
        if isinstance(func, ast.Attribute):
            base = func.value
            if isinstance(base, ast.Name) and base.id == "self" and self.self_cls:
                target = self.p.index.find_method(self.self_cls, func.attr)
                bound = True
            elif (
                isinstance(base, ast.Call)
                and dotted(base.func) == "super"
                and self.self_cls
                and self.owner
            ):
                target = self.p.index.find_method(
                    self.self_cls, func.attr, after=self.owner
                )
                bound = True
            elif self.p.meta_ref is not None and META in receiver:
                # A method of CommonAttentionMetadata itself, on the shared object.
                target = self.p.index.find_method(self.p.meta_ref, func.attr)
                args = [frozenset({META}), *args]
        elif isinstance(func, ast.Name):
            cls = self.p.index.resolve_class(self.module, func.id)
            if cls is not None:
                return self.built(kwargs)
            found = self.p.index.resolve_function(self.module, func.id)
            if found is not None:
                target = (None, found[1])
        if (
            isinstance(func, ast.Attribute)
            and target is None
            and func.attr[:1].isupper()
        ):
            return self.built(kwargs)  # module.ClassName(...)
        if target is None or self.depth >= MAX_DEPTH:
            return EMPTY
        if not any(args) and not any(kwargs.values()):
            return EMPTY
        owner, callee = target
        params = _bind(callee, args, kwargs, skip_self=bound)
        if not params:
            return EMPTY
        self_cls = self.self_cls if bound else None
        return self.p.analyse(self_cls, owner, callee, params, self.depth + 1, self.via)


def _bind(
    func: ast.FunctionDef,
    args: list[Taints],
    kwargs: dict[str | None, Taints],
    skip_self: bool,
) -> dict[str, Taints]:
    positional = [*func.args.posonlyargs, *func.args.args]
    if skip_self and positional:
        positional = positional[1:]
    params: dict[str, Taints] = {}
    for param, taints in zip(positional, args, strict=False):
        if taints:
            params[param.arg] = taints
    names = {a.arg for a in [*positional, *func.args.kwonlyargs]}
    for key, taints in kwargs.items():
        if key in names and taints:
            params[key] = taints
    return params
