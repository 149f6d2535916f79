"""The static pass: find builder code that writes shared metadata state, by reading it.

For every class of the tree that has a metadata builder's ``build`` or
``build_for_cudagraph_capture`` (its own or inherited), this follows the
``CommonAttentionMetadata`` parameter through the method and what it calls
(methods of the class and its bases, ``super()``, module functions of the
tree, a few levels deep) and reports each statement that writes one of its
fields in place: an in-place tensor method (``zero_``, ``fill_``, ``copy_``,
any ``name_``), ``out=``, slice or index assignment, augmented assignment, on
the field itself or on a name that aliases it (a view, ``.numpy()``, a
metadata object built from it). Assigning a field of the shared object is
reported as a "reassignment". Branches are merged, so a write survives when
one path still aliases the shared tensor; a ``.clone()`` ends the alias.

Nothing is imported; the tree may be any release or a checkout.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from vllm_patchkit.audit.source import ClassRef, Module, SourceIndex, dotted

ENTRY_METHODS = ("build", "build_for_cudagraph_capture")
MAX_DEPTH = 4
"""Calls followed below an entry method: build -> helper -> helper -> ..."""

# Methods whose result shares storage with the receiver (or may: reshape and
# contiguous return the receiver itself when they can).
VIEW_METHODS = frozenset(
    {
        "view", "view_as", "reshape", "reshape_as", "narrow", "squeeze",
        "unsqueeze", "flatten", "unflatten", "select", "expand", "expand_as",
        "t", "transpose", "permute", "as_strided", "detach", "contiguous",
        "numpy", "__getitem__", "diagonal", "movedim", "split", "chunk",
        "unbind", "swapaxes",
    }
)  # fmt: skip
# Trailing-underscore methods that change no element of the tensor.
NOT_WRITES = frozenset({"requires_grad_", "share_memory_", "record_stream_"})
COPY_FUNCS = frozenset({"copy", "copy.copy", "shallow_copy"})
REPLACE_FUNCS = frozenset({"replace", "dataclasses.replace"})
MUTABLE_HINTS = ("Tensor", "ndarray", "dict", "list", "np.", "torch.")

META = ("meta",)
COPY = ("copy",)
"""A shallow copy of the shared object: its tensors are shared, its slots not."""
Taint = tuple[str, ...]
Taints = frozenset[Taint]
EMPTY: Taints = frozenset()


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
    unparsable: list[str]
    too_large: dict[str, int] = field(default_factory=dict)
    """Modules not read (past ``MAX_SOURCE_BYTES``) -> their size in bytes."""


def analyse_tree(root: Path) -> StaticResult:
    index = SourceIndex(root)
    meta_ref, names = index.metadata_fields()
    mutable = _mutable_fields(meta_ref) if meta_ref else set()
    pass_ = _Pass(index, names, mutable, meta_ref)
    builders = []
    # A builder class defines an entry method or inherits one: its module
    # names a builder (the text test only spares parsing the other modules).
    for module in index.modules_where(
        lambda text: "Builder" in text or "def build" in text
    ):
        for cls_node in module.classes.values():
            cls = ClassRef(module, cls_node)
            entered = False
            for entry in ENTRY_METHODS:
                found = index.find_method(cls, entry)
                if found is None:
                    continue
                owner, func = found
                params = _bind_meta_params(func)
                if not params:
                    continue
                entered = True
                pass_.analyse(
                    cls, owner, func, params, depth=0, via=f"{cls.name}.{entry}"
                )
            if entered:
                builders.append(cls.name)
    return StaticResult(
        writes=sorted(pass_.writes.values(), key=lambda w: (w.file, w.line, w.field)),
        metadata_class=meta_ref.module.path if meta_ref else None,
        fields=sorted(names),
        builders=sorted(set(builders)),
        unparsable=index.unparsable,
        too_large=index.too_large,
    )


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


def _is_meta_param(arg: ast.arg) -> bool:
    if arg.annotation is not None and "CommonAttentionMetadata" in ast.unparse(
        arg.annotation
    ):
        return True
    return arg.arg in ("common_attn_metadata", "common_metadata")


def _bind_meta_params(func: ast.FunctionDef) -> dict[str, Taints]:
    args = [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]
    return {a.arg: frozenset({META}) for a in args if _is_meta_param(a)}


class _Pass:
    """Shared state of one tree's analysis: the index, the fields, the writes."""

    def __init__(
        self,
        index: SourceIndex,
        fields: set[str],
        mutable: set[str],
        meta_ref: ClassRef | None = None,
    ) -> None:
        self.index = index
        self.meta_ref = meta_ref
        self.fields = fields
        self.mutable = mutable
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
        walker = _Walker(self, self_cls, owner, module, func, depth, via)
        walker.block(func.body, dict(params))
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


class _Walker:
    """A flow-sensitive walk of one function: names -> what they alias."""

    def __init__(
        self,
        pass_: _Pass,
        self_cls: ClassRef | None,
        owner: ClassRef | None,
        module: Module,
        func: ast.FunctionDef,
        depth: int,
        via: str,
    ) -> None:
        self.p = pass_
        self.self_cls = self_cls
        self.owner = owner
        self.module = module
        self.func = func
        self.depth = depth
        self.via = via
        self.method = f"{owner.name}.{func.name}" if owner else func.name
        self.returns: set[Taint] = set()

    # -- statements -------------------------------------------------------

    def block(self, body: Iterable[ast.stmt], env: dict[str, Taints]) -> None:
        for stmt in body:
            self.stmt(stmt, env)

    def stmt(self, node: ast.stmt, env: dict[str, Taints]) -> None:
        if isinstance(node, ast.Assign):
            value = self.expr(node.value, env)
            for target in node.targets:
                self.assign(target, value, env, node)
        elif isinstance(node, ast.AnnAssign):
            value = self.expr(node.value, env) if node.value else EMPTY
            if node.value is not None:
                self.assign(node.target, value, env, node)
        elif isinstance(node, ast.AugAssign):
            self.expr(node.value, env)
            self.augassign(node, env)
        elif isinstance(node, ast.Expr):
            self.expr(node.value, env)
        elif isinstance(node, ast.Return):
            if node.value is not None:
                self.returns |= self.expr(node.value, env)
        elif isinstance(node, ast.If):
            self.expr(node.test, env)
            self.branches([node.body, node.orelse], env)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            if isinstance(node, ast.While):
                self.expr(node.test, env)
            else:
                self.expr(node.iter, env)
                self.assign(node.target, EMPTY, env, node)
            # Twice: a write in the loop may use an alias made later in it.
            self.branches([[], node.body], env)
            self.branches([[], node.body], env)
            self.block(node.orelse, env)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                value = self.expr(item.context_expr, env)
                if item.optional_vars is not None:
                    self.assign(item.optional_vars, value, env, node)
            self.block(node.body, env)
        elif isinstance(node, ast.Try):
            bodies = [node.body + node.orelse] + [h.body for h in node.handlers]
            self.branches(bodies, env)
            self.block(node.finalbody, env)
        elif isinstance(node, ast.Match):
            self.expr(node.subject, env)
            self.branches([c.body for c in node.cases] + [[]], env)
        elif isinstance(node, (ast.Assert, ast.Raise, ast.Delete)):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.expr(child, env)

    def branches(self, bodies: list[list[ast.stmt]], env: dict[str, Taints]) -> None:
        """Walk each body from one state; then a name aliases what any path left."""
        results = []
        for body in bodies:
            local = dict(env)
            self.block(body, local)
            results.append(local)
        merged: dict[str, Taints] = {}
        for local in results:
            for name, taints in local.items():
                merged[name] = merged.get(name, EMPTY) | taints
        env.clear()
        env.update(merged)

    def assign(
        self, target: ast.expr, value: Taints, env: dict[str, Taints], node: ast.stmt
    ) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.assign(element, EMPTY, env, node)
        elif isinstance(target, ast.Starred):
            self.assign(target.value, EMPTY, env, node)
        elif isinstance(target, ast.Attribute):
            owner = self.expr(target.value, env)
            if (
                META in owner
                and target.attr in self.p.fields
                and not self.own_cache(target)
            ):
                self.write(node, target.attr, "reassignment")
            key = self.self_key(target)
            if key is not None:
                env[key] = value
        elif isinstance(target, ast.Subscript):
            self.expr(target.slice, env)
            op = "slice assignment" if _is_slice(target.slice) else "index assignment"
            for fld in self.fields_of(self.expr(target.value, env)):
                self.write(node, fld, op)

    def augassign(self, node: ast.AugAssign, env: dict[str, Taints]) -> None:
        target = node.target
        if isinstance(target, ast.Name):
            fields = self.fields_of(env.get(target.id, EMPTY))
        elif isinstance(target, ast.Subscript):
            self.expr(target.slice, env)
            fields = self.fields_of(self.expr(target.value, env))
        else:  # Attribute
            owner = self.expr(target.value, env)
            fields = self.fields_of(self.expr(target, env))
            if (
                META in owner
                and target.attr in self.p.fields
                and target.attr not in fields
            ):
                self.write(node, target.attr, "reassignment")
        for fld in fields:
            self.write(node, fld, "augmented assignment")

    def own_cache(self, target: ast.Attribute) -> bool:
        """The metadata class setting a private slot of its own (a memo cache)."""
        return (
            self.p.meta_ref is not None
            and self.owner is not None
            and self.owner.node is self.p.meta_ref.node
            and target.attr.startswith("_")
        )

    def write(self, node: ast.AST, fld: str, op: str) -> None:
        self.p.record(self.module, node.lineno, fld, self.method, op, self.via)

    # -- expressions ------------------------------------------------------

    def fields_of(self, taints: Taints) -> list[str]:
        return sorted({t[1] for t in taints if t[0] == "field"})

    def self_key(self, node: ast.Attribute) -> str | None:
        if self.self_cls is None:
            return None  # a function, or a method of the metadata class itself
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            return f"self.{node.attr}"
        return None

    def expr(self, node: ast.expr | None, env: dict[str, Taints]) -> Taints:
        if node is None:
            return EMPTY
        if isinstance(node, ast.Name):
            return env.get(node.id, EMPTY)
        if isinstance(node, ast.Attribute):
            key = self.self_key(node)
            if key is not None:
                return env.get(key, EMPTY)
            return self.attribute(self.expr(node.value, env), node.attr)
        if isinstance(node, ast.Subscript):
            self.expr(node.slice, env)
            base = self.expr(node.value, env)
            return frozenset(t for t in base if t[0] == "field")
        if isinstance(node, ast.Call):
            return self.call(node, env)
        if isinstance(node, ast.NamedExpr):
            value = self.expr(node.value, env)
            env[node.target.id] = value
            return value
        if isinstance(node, ast.IfExp):
            self.expr(node.test, env)
            return self.expr(node.body, env) | self.expr(node.orelse, env)
        if isinstance(node, ast.BoolOp):
            out = EMPTY
            for value in node.values:
                out |= self.expr(value, env)
            return out
        if isinstance(node, ast.Lambda):
            return EMPTY
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, env)
            elif isinstance(child, ast.comprehension):
                self.expr(child.iter, env)
        return EMPTY

    def attribute(self, owner: Taints, attr: str) -> Taints:
        out: set[Taint] = set()
        for taint in owner:
            if taint in (META, COPY) and attr in self.p.mutable:
                out.add(("field", attr))
            elif taint[0] == "attr" and taint[1] == attr:
                out.add(META if taint[2] == "*meta*" else ("field", taint[2]))
            elif taint[0] == "field" and attr == "T":
                out.add(taint)
        return frozenset(out)

    def call(self, node: ast.Call, env: dict[str, Taints]) -> Taints:
        args = [
            self.expr(a.value if isinstance(a, ast.Starred) else a, env)
            for a in node.args
        ]
        kwargs = {k.arg: self.expr(k.value, env) for k in node.keywords}
        for name, taints in kwargs.items():
            if name == "out":
                for fld in self.fields_of(taints):
                    self.write(node, fld, "out=")
        func = node.func
        name = dotted(func)
        receiver = EMPTY
        if isinstance(func, ast.Attribute):
            attr = func.attr
            receiver = self.expr(func.value, env)
            if (
                attr.endswith("_")
                and not attr.startswith("__")
                and attr not in NOT_WRITES
            ):
                # torch.zero_(x) and friends write their first argument.
                target = (
                    args[0] if name and name.startswith("torch.") and args else receiver
                )
                for fld in self.fields_of(target):
                    self.write(node, fld, attr)
                return frozenset(t for t in target if t[0] == "field")
            if attr in VIEW_METHODS:
                return frozenset(t for t in receiver if t[0] == "field")
        if name in COPY_FUNCS and args:
            copied = {COPY if t == META else t for t in args[0]}
            return frozenset(t for t in copied if t == COPY or t[0] == "attr")
        if name in REPLACE_FUNCS and args and args[0] & {META, COPY}:
            return self.built(kwargs) | frozenset(
                ("attr", f, f) for f in self.p.mutable if f not in kwargs
            )
        return self.follow(node, args, kwargs, receiver)

    def built(self, kwargs: dict[str | None, Taints]) -> Taints:
        """An object whose attributes are the keyword arguments it was made from."""
        out = set()
        for key, taints in kwargs.items():
            if key is None:
                continue
            for fld in self.fields_of(taints):
                out.add(("attr", key, fld))
            if META in taints:  # a nested metadata object: obj.key.f aliases f
                out.add(("attr", key, "*meta*"))
        return frozenset(out)

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


def _is_slice(node: ast.expr) -> bool:
    if isinstance(node, ast.Slice):
        return True
    if isinstance(node, ast.Tuple):
        return any(isinstance(e, ast.Slice) for e in node.elts)
    return False
