"""In-place writes to shared attention metadata, read from a method's AST.

vLLM's runner hands every KV-cache group a shallow copy of one
``CommonAttentionMetadata``: its tensors are shared, so a builder that writes
one in place (``zero_``, ``fill_``, ``copy_``, ``t[:] = ...``, ``out=``,
``+=``) changes what every later builder reads. This is the one analysis of
such writes (the overlay's readers, the series invariants, the audit).

It follows aliases statement by statement (a name bound to a field, a view
of one, the metadata or a shallow copy of it); branches merge, loops run
until nothing changes, ``.clone()`` ends an alias. A :class:`Write` is
*direct* when spelled on the parameter itself (``m.f.zero_()``): the only
form a patch can take out. What it cannot follow is a :class:`Doubt`, never
silence. A prover needs no write and no doubt; a reader of the direct writes
needs nothing :meth:`Walker.unproven` lists. The audit overrides
:meth:`Walker.follow` to follow calls through the tree.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

META = ("meta",)
"""The shared metadata object itself."""
COPY = ("copy",)
"""A shallow copy of the shared object: its tensors are shared, its slots not."""
Taint = tuple[str, ...]
"""``META``, ``COPY``, ``("field", f)`` (field ``f`` or a view of it) or
``("attr", key, f)`` (an object whose attribute ``key`` is field ``f``;
``f == "*meta*"``: the metadata itself)."""
Taints = frozenset[Taint]
EMPTY: Taints = frozenset()

VIEW_METHODS = frozenset(
    {
        "view", "view_as", "reshape", "reshape_as", "narrow", "squeeze",
        "unsqueeze", "flatten", "unflatten", "select", "expand", "expand_as",
        "t", "transpose", "permute", "as_strided", "detach", "contiguous",
        "numpy", "__getitem__", "diagonal", "movedim", "split", "chunk",
        "unbind", "swapaxes",
    }
)  # fmt: skip
"""Methods whose result shares storage with the receiver (or may: reshape and
contiguous return the receiver itself when they can)."""
VIEW_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "data"})
"""Attributes of a tensor that share its storage."""
NEW_VALUE_READS = frozenset(
    {"clone", "tolist", "item", "size", "numel", "dim", "shape", "dtype", "device"}
)
"""Attributes of a tensor whose result shares no storage with it. Anything
else (``cpu``, ``to``, an unknown method) may hand on the storage: a doubt."""
NOT_WRITES = frozenset({"requires_grad_", "share_memory_", "record_stream_"})
"""Trailing-underscore methods that change no element of the tensor."""
ZEROING = frozenset({"zero_", "fill_"})
COPY_FUNCS = frozenset({"copy", "copy.copy", "shallow_copy"})
REPLACE_FUNCS = frozenset({"replace", "dataclasses.replace"})
HARMLESS_BUILTINS = frozenset({"isinstance", "len", "type", "id"})
"""Builtins that read an argument and keep no reference to it."""
FRAME_ACCESS = frozenset({"eval", "exec", "locals", "vars", "globals"})
"""Calls that reach a local name without naming it."""


@dataclass(frozen=True)
class Write:
    """One statement that writes a shared field (or a view of it)."""

    line: int
    field: str
    op: str
    """The in-place method (``zero_``), ``out=``, ``slice assignment``, ``index
    assignment``, ``augmented assignment`` or ``reassignment`` (of the field
    on the shared object)."""
    direct: bool
    """Spelled on a parameter itself: ``m.f.op_()``, ``m.f[...] = x``,
    ``m.f = x``, ``m.f += x``; not through an alias, a view or a function."""
    zeroes: bool
    """A direct, whole ``zero_()`` or ``fill_(0)``."""
    source: str
    through: str | None = None
    """The local name the write went through, when it is an alias."""


@dataclass(frozen=True)
class Doubt:
    """A use of shared state whose effect the analysis cannot see."""

    line: int
    fields: frozenset[str]
    """The fields involved; ``"*"`` for the metadata object itself."""
    why: str


class Walker:
    """A flow-sensitive walk of one function: names -> what they alias.

    ``params`` maps the parameters that hold shared state to their taints
    (``{"common_attn_metadata": {META}}``); ``mutable`` are the fields whose
    value can change in place (tensors, arrays; default: all of ``fields``).
    """

    def __init__(
        self,
        func: ast.FunctionDef | ast.AsyncFunctionDef,
        params: dict[str, Taints],
        fields: Iterable[str],
        mutable: Iterable[str] | None = None,
    ) -> None:
        self.func = func
        self.params = dict(params)
        self.fields = frozenset(fields)
        self.mutable = self.fields if mutable is None else frozenset(mutable)
        self.writes: list[Write] = []
        self.doubts: list[Doubt] = []
        self.returns: set[Taint] = set()
        self.bindings: dict[str, list[ast.AST]] = {}
        """Local name -> the statements that bound shared state to it."""
        self._seen: set[tuple[int, int, str]] = set()

    def run(self) -> Walker:
        self.block(self.func.body, dict(self.params))
        return self

    def unproven(self) -> list[Doubt]:
        """What keeps a prover from taking the direct writes as all there is,
        by line: every doubt, and every write through an alias, a view or a
        call (after the statements that bound the alias it went through)."""
        found = list(self.doubts)
        for write in self.writes:
            if write.direct:
                continue
            fld = frozenset({write.field})
            for bound in self.bindings.get(write.through or "", []):
                why = f"{_text(getattr(bound, 'value', None))} escapes: {_text(bound)}"
                found.append(Doubt(getattr(bound, "lineno", 0), fld, why))
            how = write.through or "a view or call"
            why = f"writes {write.field} through {how}: {write.source}"
            found.append(Doubt(write.line, fld, why))
        return sorted(found, key=lambda doubt: doubt.line)

    # -- hooks ------------------------------------------------------------

    def follow(
        self,
        node: ast.Call,
        args: list[Taints],
        kwargs: dict[str | None, Taints],
        receiver: Taints,
    ) -> Taints | None:
        """What a call into other code returns; None: not followed (a doubt
        when it receives shared state)."""
        return None

    def self_key(self, node: ast.Attribute) -> str | None:
        """The env key for ``self.x``, when the walker tracks the instance."""
        return None

    def own_cache(self, target: ast.Attribute) -> bool:
        """Whether setting ``target`` is the metadata class's own memo slot."""
        return False

    def record(self, write: Write) -> None:
        if write not in self.writes:  # a loop walks its body more than once
            self.writes.append(write)

    def doubt(self, node: ast.AST, taints: Taints, why: str) -> None:
        line = getattr(node, "lineno", 0)
        key = (line, getattr(node, "col_offset", 0), why)
        if key in self._seen:
            return  # a loop walks its body more than once
        self._seen.add(key)
        self.doubts.append(Doubt(line, _fields(taints), why))

    # -- statements -------------------------------------------------------

    def block(self, body: Iterable[ast.stmt], env: dict[str, Taints]) -> None:
        for stmt in body:
            self.stmt(stmt, env)

    def stmt(self, node: ast.stmt, env: dict[str, Taints]) -> None:
        if isinstance(node, ast.Assign):
            if self._unpack(node, env):
                return
            value = self.expr(node.value, env)
            for target in node.targets:
                self.assign(target, value, env, node)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.assign(node.target, self.expr(node.value, env), env, node)
        elif isinstance(node, ast.AugAssign):
            self.expr(node.value, env)
            self.augassign(node, env)
        elif isinstance(node, ast.Expr):
            self.expr(node.value, env)
        elif isinstance(node, ast.Return):
            taints = self.expr(node.value, env)
            self.returns |= taints
            if taints:
                self.doubt(node, taints, f"returns {_text(node.value)}")
        elif isinstance(node, ast.If):
            self.expr(node.test, env)
            self.branches([node.body, node.orelse], env)
        elif isinstance(node, ast.For | ast.AsyncFor | ast.While):
            self.loop(node, env)
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                value = self.expr(item.context_expr, env)
                if item.optional_vars is not None:
                    self.assign(item.optional_vars, value, env, node)
            self.block(node.body, env)
        elif isinstance(node, ast.Try | ast.TryStar):
            bodies = [node.body + node.orelse] + [h.body for h in node.handlers]
            self.branches(bodies, env)
            self.block(node.finalbody, env)
        elif isinstance(node, ast.Match):
            subject = self.expr(node.subject, env)
            if subject:
                self.doubt(node, subject, f"matches {_text(node.subject)}")
            self.branches([c.body for c in node.cases] + [[]], env)
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                taints = self.expr(target, env)
                if taints or self._names_field(target):
                    self.doubt(node, taints, f"deletes {_text(target)}")
        elif isinstance(node, ast.Assert | ast.Raise):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.expr(child, env)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            shared = [n for n in node.names if env.get(n) or n in self.params]
            if shared:
                kind = type(node).__name__
                self.doubt(node, META, f"declares {', '.join(shared)} {kind}")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            self.nested(node, env)

    def loop(
        self, node: ast.For | ast.AsyncFor | ast.While, env: dict[str, Taints]
    ) -> None:
        """The body from every state a pass can leave, until none is new."""
        if isinstance(node, ast.While):
            self.expr(node.test, env)
        else:
            items = self.expr(node.iter, env)
            if items:
                self.doubt(node, items, f"iterates over {_text(node.iter)}")
            self.assign(node.target, EMPTY, env, node)
        while True:
            before = dict(env)
            self.branches([[], node.body], env)
            if env == before:
                break
        self.block(node.orelse, env)

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

    def nested(self, node: ast.AST, env: dict[str, Taints]) -> None:
        """A nested function or class: a doubt when it reaches shared state."""
        used = {
            n.id
            for n in ast.walk(node)
            if isinstance(n, ast.Name) and (env.get(n.id) or n.id in self.params)
        }
        if used:
            kind = "lambda" if isinstance(node, ast.Lambda) else "nested definition"
            self.doubt(node, META, f"a {kind} uses {', '.join(sorted(used))}")

    def _unpack(self, node: ast.Assign, env: dict[str, Taints]) -> bool:
        """``a, b = x, y``: each name gets its own value's taints."""
        target, value = node.targets[0], node.value
        if not (
            len(node.targets) == 1
            and isinstance(target, ast.Tuple | ast.List)
            and isinstance(value, ast.Tuple | ast.List)
            and len(target.elts) == len(value.elts)
            and not any(isinstance(e, ast.Starred) for e in [*target.elts, *value.elts])
        ):
            return False
        values = [self.expr(v, env) for v in value.elts]
        for element, taints in zip(target.elts, values, strict=True):
            self.assign(element, taints, env, node)
        return True

    def assign(
        self, target: ast.expr, value: Taints, env: dict[str, Taints], node: ast.AST
    ) -> None:
        if isinstance(target, ast.Name):
            if target.id in self.params:
                self.doubt(node, META, f"rebinds {target.id}")
            env[target.id] = value
            bound = self.bindings.setdefault(target.id, [])
            if value and node not in bound:  # a loop walks its body again
                bound.append(node)
        elif isinstance(target, ast.Tuple | ast.List | ast.Starred):
            if value:
                self.doubt(node, value, f"unpacks {_text(node)}")
            elements = target.elts if not isinstance(target, ast.Starred) else [target]
            for element in elements:
                inner = element.value if isinstance(element, ast.Starred) else element
                self.assign(inner, EMPTY, env, node)
        elif isinstance(target, ast.Attribute):
            owner = self.expr(target.value, env)
            key = self.self_key(target)
            if owner & {META} and target.attr in self.fields:
                if not self.own_cache(target):
                    self.write(node, target.attr, "reassignment", target)
            elif target.attr in self.fields and not owner:
                self.doubt(node, EMPTY, f"writes {_text(target)}, which may alias")
            if key is not None:
                env[key] = value
            elif value:
                self.doubt(node, value, f"stores shared state: {_text(node)}")
        elif isinstance(target, ast.Subscript):
            self.expr(target.slice, env)
            op = "slice assignment" if _is_slice(target.slice) else "index assignment"
            base = self.expr(target.value, env)
            for fld in fields_of(base):
                self.write(node, fld, op, target)
            if not base and self._names_field(target):
                self.doubt(node, EMPTY, f"writes {_text(target)}, which may alias")
            if value and not base:
                self.doubt(node, value, f"stores shared state: {_text(node)}")

    def augassign(self, node: ast.AugAssign, env: dict[str, Taints]) -> None:
        target = node.target
        if isinstance(target, ast.Name):
            fields = fields_of(env.get(target.id, EMPTY))
        elif isinstance(target, ast.Subscript):
            self.expr(target.slice, env)
            fields = fields_of(self.expr(target.value, env))
        else:  # Attribute
            owner = self.expr(target.value, env)
            fields = fields_of(self.expr(target, env))
            if (
                owner & {META}
                and target.attr in self.fields
                and target.attr not in fields
            ):
                self.write(node, target.attr, "reassignment", target)
        if not fields and self._names_field(target):
            self.doubt(node, EMPTY, f"writes {_text(target)}, which may alias")
        for fld in fields:
            self.write(node, fld, "augmented assignment", target)

    def write(self, node: ast.AST, fld: str, op: str, spelled: ast.expr | None) -> None:
        """Record a write of ``fld``; ``spelled`` is the written expression
        as the code names it (None: a function writes it, ``out=``)."""
        root, whole, named = _spelling(spelled)
        direct = named == fld and isinstance(root, ast.Name) and root.id in self.params
        through = (
            root.id
            if isinstance(root, ast.Name) and root.id not in self.params
            else None
        )
        zeroes = direct and whole and _zeroing(node, op)
        self.record(
            Write(node.lineno, fld, op, direct, zeroes, _text(node), through)  # type: ignore[attr-defined]
        )

    def _names_field(self, node: ast.expr) -> bool:
        """Whether ``node`` is spelled ``<x>.<field>`` (maybe subscripted)."""
        return _spelling(node)[2] in self.fields

    # -- expressions ------------------------------------------------------

    def expr(self, node: ast.expr | None, env: dict[str, Taints]) -> Taints:
        if node is None:
            return EMPTY
        if isinstance(node, ast.Name):
            return env.get(node.id, EMPTY)
        if isinstance(node, ast.Attribute):
            key = self.self_key(node)
            if key is not None:
                return env.get(key, EMPTY)
            owner = self.expr(node.value, env)
            if owner and node.attr.startswith("__"):
                self.doubt(node, owner, f"uses {_text(node)}")
            elif fields_of(owner) and not (
                node.attr in VIEW_ATTRIBUTES
                or node.attr in NEW_VALUE_READS
                or node.attr in self.fields
            ):
                self.doubt(node, owner, f"{_text(node.value)} escapes: {_text(node)}")
            return self.attribute(owner, node.attr)
        if isinstance(node, ast.Subscript):
            self.expr(node.slice, env)
            base = self.expr(node.value, env)
            if base and not fields_of(base):
                self.doubt(node, base, f"indexes shared state: {_text(node)}")
            return frozenset(t for t in base if t[0] == "field")
        if isinstance(node, ast.Call):
            return self.call(node, env)
        if isinstance(node, ast.NamedExpr):
            value = self.expr(node.value, env)
            self.assign(node.target, value, env, node)
            return value
        if isinstance(node, ast.IfExp):
            self.expr(node.test, env)
            return self.expr(node.body, env) | self.expr(node.orelse, env)
        if isinstance(node, ast.BoolOp):
            out = EMPTY
            for value in node.values:
                out |= self.expr(value, env)
            return out
        if isinstance(
            node,
            ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp,
        ):
            self.nested(node, env)
            return EMPTY
        reads_only = isinstance(
            node,
            ast.BinOp | ast.UnaryOp | ast.Compare | ast.JoinedStr | ast.FormattedValue
            | ast.Slice | ast.Constant,
        )  # fmt: skip
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                taints = self.expr(child, env)
                if taints and not reads_only:
                    self.doubt(child, taints, f"{_text(child)} escapes: {_text(node)}")
        return EMPTY

    def attribute(self, owner: Taints, attr: str) -> Taints:
        out: set[Taint] = set()
        for taint in owner:
            if taint in (META, COPY) and attr in self.mutable:
                out.add(("field", attr))
            elif taint[0] == "attr" and taint[1] == attr:
                out.add(META if taint[2] == "*meta*" else ("field", taint[2]))
            elif taint[0] == "field" and attr in VIEW_ATTRIBUTES:
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
                for fld in fields_of(taints):
                    self.write(node, fld, "out=", None)
        func = node.func
        name = dotted(func)
        receiver = EMPTY
        if isinstance(func, ast.Name) and func.id in FRAME_ACCESS:
            self.doubt(node, META, f"{func.id}() reaches local names")
        if isinstance(func, ast.Attribute):
            attr = func.attr
            receiver = self.expr(func.value, env)
            if (
                attr.endswith("_")
                and not attr.startswith("__")
                and attr not in NOT_WRITES
            ):
                return self._in_place(node, func, name, args, receiver)
            if attr in VIEW_METHODS:
                return frozenset(t for t in receiver if t[0] == "field")
            if attr in NEW_VALUE_READS and fields_of(receiver) and not any(args):
                return EMPTY
        if name in COPY_FUNCS and args:
            copied = {COPY if t == META else t for t in args[0]}
            return frozenset(t for t in copied if t == COPY or t[0] == "attr")
        if name in REPLACE_FUNCS and args and args[0] & {META, COPY}:
            return self.built(kwargs) | frozenset(
                ("attr", f, f) for f in self.mutable if f not in kwargs
            )
        if name in HARMLESS_BUILTINS:
            return EMPTY
        result = self.follow(node, args, kwargs, receiver)
        if result is None:
            passed = [*args, *kwargs.values(), receiver]
            if any(passed):
                shared = frozenset().union(*passed)
                self.doubt(node, shared, f"passes shared state on: {_text(node)}")
            return EMPTY
        return result

    def _in_place(
        self,
        node: ast.Call,
        func: ast.Attribute,
        name: str | None,
        args: list[Taints],
        receiver: Taints,
    ) -> Taints:
        """``x.op_(...)`` writes ``x``; ``torch.op_(x, ...)`` writes ``x``."""
        functional = bool(name and name.startswith("torch.") and args)
        target = args[0] if functional else receiver
        for fld in fields_of(target):
            self.write(node, fld, func.attr, None if functional else func.value)
        if not target and not functional and self._names_field(func.value):
            self.doubt(node, EMPTY, f"writes {_text(func.value)}, which may alias")
        if func.attr == "set_" and any(args):
            self.doubt(node, frozenset().union(*args), f"aliases: {_text(node)}")
        return frozenset(t for t in target if t[0] == "field")

    def built(self, kwargs: dict[str | None, Taints]) -> Taints:
        """An object whose attributes are the keyword arguments it was made from."""
        out = set()
        for key, taints in kwargs.items():
            if key is None:
                continue
            for fld in fields_of(taints):
                out.add(("attr", key, fld))
            if META in taints:  # a nested metadata object: obj.key.f aliases f
                out.add(("attr", key, "*meta*"))
        return frozenset(out)


def fields_of(taints: Taints) -> list[str]:
    return sorted({t[1] for t in taints if t[0] == "field"})


def _fields(taints: Taints) -> frozenset[str]:
    out = set(fields_of(taints))
    if any(t[0] != "field" for t in taints):
        out.add("*")
    return frozenset(out)


def _spelling(node: ast.expr | None) -> tuple[ast.expr | None, bool, str | None]:
    """For ``<root>.<name>[...]...``: (root, no subscript, name)."""
    whole = True
    while isinstance(node, ast.Subscript):
        node, whole = node.value, False
    if isinstance(node, ast.Attribute):
        return node.value, whole, node.attr
    return node, whole, None


def _zeroing(node: ast.AST, op: str) -> bool:
    if not isinstance(node, ast.Call) or op not in ZEROING:
        return False
    if op == "zero_":
        return not node.args and not node.keywords
    return (
        len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == 0
    )


def _is_slice(node: ast.expr) -> bool:
    if isinstance(node, ast.Slice):
        return True
    if isinstance(node, ast.Tuple):
        return any(isinstance(e, ast.Slice) for e in node.elts)
    return False


def dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def _text(node: ast.AST | None) -> str:
    text = ast.unparse(node) if isinstance(node, ast.AST) else "?"
    return text if len(text) <= 60 else text[:57] + "..."
