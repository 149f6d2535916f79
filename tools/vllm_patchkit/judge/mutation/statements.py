"""Mutants made from a fix's own diff: each statement it adds dropped, and
each adjacent pair of statements in the methods it names swapped.

A swapped pair that commutes (:func:`commute`: no call, and neither touches
what the other writes) is the same program in either order: no test can
tell the two apart, so it is an equivalent mutant, named with the reason and
never run or counted as a survivor.

The named mutants of a fix (:class:`.mutants.Mutant`) are the wrong fixes
someone could plausibly write; these are the mechanical ones that say
whether a test guards every line of the fix. Both work on the source text
by the AST's line spans, so a statement over several lines is one
statement; every mutant is compiled before it is handed out.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from vllm_patchkit.judge.mutation.mutants import MutationError


@dataclass(frozen=True)
class SourceMutant:
    name: str
    description: str
    source: str
    """The whole mutated module."""
    equivalent: str = ""
    """Why the mutant is the same program as the fix (not run, not counted),
    or empty."""


def _body_lists(node: ast.AST) -> Iterator[list[ast.stmt]]:
    """Every list of statements under ``node`` (bodies, else and finally
    blocks, handlers), outermost first."""
    for name in ("body", "orelse", "finalbody"):
        block = getattr(node, name, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield block
            for statement in block:
                yield from _body_lists(statement)
    for handler in getattr(node, "handlers", []):
        yield from _body_lists(handler)


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _statements(module: ast.Module) -> Iterator[ast.stmt]:
    for block in _body_lists(module):
        yield from (s for s in block if not _is_docstring(s))


def _key(statement: ast.stmt) -> str:
    """What makes a statement the same in the base and the fix: a
    definition's name; a compound statement's header (its blocks are
    compared statement by statement); any other statement's text."""
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return f"def {statement.name}"
    if any(isinstance(getattr(statement, b, None), list) for b in ("body", "orelse")):
        return ast.unparse(statement).splitlines()[0]
    return ast.unparse(statement)


def same_behaviour_key(source: str) -> str:
    """A module's normalised text without ``pass`` lines: two mutants with
    the same key differ only by where a ``pass`` stands."""
    text = ast.unparse(ast.parse(source))
    return "\n".join(line for line in text.splitlines() if line.strip() != "pass")


def _first_line(statement: ast.stmt) -> int:
    """A definition starts at its first decorator."""
    decorators = getattr(statement, "decorator_list", [])
    return min([statement.lineno, *(d.lineno for d in decorators)])


def _replace(lines: list[str], statement: ast.stmt, new: list[str]) -> list[str]:
    """``lines`` with ``statement``'s lines replaced by ``new`` (at its indent)."""
    first, last = _first_line(statement) - 1, statement.end_lineno
    assert last is not None
    indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
    return lines[:first] + [indent + line for line in new] + lines[last:]


def _compiled(name: str, lines: list[str]) -> str:
    source = "".join(lines)
    try:
        compile(source, f"<mutant {name}>", "exec")
    except SyntaxError as exc:
        raise MutationError(f"{name}: does not compile: {exc}") from exc
    return source


def added_statements(base: str, fixed: str) -> list[ast.stmt]:
    """The statements of ``fixed`` that ``base`` lacks (by :func:`_key`,
    counted: a statement the fix moves is not added), outermost first."""
    left: dict[str, int] = {}
    for statement in _statements(ast.parse(base)):
        left[_key(statement)] = left.get(_key(statement), 0) + 1
    added = []
    for statement in _statements(ast.parse(fixed)):
        text = _key(statement)
        if left.get(text):
            left[text] -= 1
        else:
            added.append(statement)
    return added


def _label(statement: ast.stmt) -> str:
    if isinstance(statement, ast.FunctionDef | ast.ClassDef):
        return f"def {statement.name}"
    first = ast.unparse(statement).splitlines()[0]
    return first if len(first) <= 60 else first[:57] + "..."


def dropped(base: str, fixed: str) -> list[SourceMutant]:
    """One mutant per statement the fix adds, with that statement dropped
    (``pass`` in its place; a whole method when the fix adds the method)."""
    lines = fixed.splitlines(keepends=True)
    mutants = []
    for statement in added_statements(base, fixed):
        name = f"drop {_label(statement)} (line {statement.lineno})"
        source = _compiled(name, _replace(lines, statement, ["pass\n"]))
        mutants.append(SourceMutant(name, f"drops `{_label(statement)}`", source))
    return mutants


def _method(module: ast.Module, cls: str, method: str) -> ast.FunctionDef:
    for node in ast.walk(module):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method:
                    return item
    raise MutationError(f"no {cls}.{method}")


def swapped(fixed: str, cls: str, methods: tuple[str, ...]) -> list[SourceMutant]:
    """One mutant per adjacent pair of statements in each of ``cls``'s
    ``methods`` (their top-level bodies), the pair's order swapped; a pair
    that commutes is marked equivalent, with the reason."""
    module = ast.parse(fixed)
    lines = fixed.splitlines(keepends=True)
    mutants = []
    for method in methods:
        body = [s for s in _method(module, cls, method).body if not _is_docstring(s)]
        for first, second in zip(body, body[1:], strict=False):
            a0, a1 = _first_line(first) - 1, first.end_lineno
            b0, b1 = _first_line(second) - 1, second.end_lineno
            assert a1 is not None and b1 is not None
            swapped_lines = (
                lines[:a0] + lines[b0:b1] + lines[a1:b0] + lines[a0:a1] + lines[b1:]
            )
            name = f"swap in {method}: {_label(first)} / {_label(second)}"
            source = _compiled(name, swapped_lines)
            description = f"runs `{_label(second)}` before `{_label(first)}`"
            mutants.append(
                SourceMutant(name, description, source, commute(first, second))
            )
    return mutants


def _path(node: ast.expr) -> str | None:
    """``a.b.c`` for a name or a chain of attributes on one, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _written(target: ast.expr) -> tuple[str | None, list[ast.expr]]:
    """The object an assignment target writes (a subscript writes into the
    object it indexes) and the expressions the target reads (its indices)."""
    reads: list[ast.expr] = []
    while isinstance(target, ast.Subscript):
        reads.append(target.slice)
        target = target.value
    return _path(target), reads


def _read_paths(nodes: list[ast.expr]) -> set[str] | None:
    """Every name or attribute chain the expressions load, outermost
    chains only; None when one is anything else a swap could reorder
    (a call, a starred or walrus expression, an await or a yield)."""
    paths: set[str] = set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(
                sub,
                ast.Call | ast.NamedExpr | ast.Await | ast.Yield | ast.YieldFrom,
            ):
                return None
        stack: list[ast.AST] = [node]
        while stack:
            sub = stack.pop()
            path = _path(sub) if isinstance(sub, ast.expr) else None
            if path is not None:
                paths.add(path)
            else:
                stack.extend(ast.iter_child_nodes(sub))
    return paths


def _effects(statement: ast.stmt) -> tuple[set[str], set[str]] | None:
    """What a plain assignment writes and reads, by name or attribute
    chain; None for any other statement (it may do anything)."""
    if isinstance(statement, ast.Assign):
        targets, value = statement.targets, statement.value
    elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
        targets, value = [statement.target], statement.value
    else:
        return None
    writes: set[str] = set()
    index_reads: list[ast.expr] = []
    for target in targets:
        path, reads = _written(target)
        if path is None:
            return None
        writes.add(path)
        index_reads.extend(reads)
    reads_found = _read_paths([value, *index_reads])
    if reads_found is None:
        return None
    return writes, reads_found


def _overlap(one: str, other: str) -> bool:
    """Whether two chains may name the same object or a part of it."""
    return one == other or one.startswith(other + ".") or other.startswith(one + ".")


def commute(first: ast.stmt, second: ast.stmt) -> str:
    """Why the two statements give the same result in either order, or ""
    when they may not.

    Only plain assignments without a call commute, and only when neither
    writes anything the other reads or writes (a name, or an attribute chain
    and what lies under it). The rule takes distinct attributes to hold
    distinct objects, as a builder's own buffers do.
    """
    effects = _effects(first), _effects(second)
    if effects[0] is None or effects[1] is None:
        return ""
    (writes_a, reads_a), (writes_b, reads_b) = effects
    for writes, touched in (
        (writes_a, writes_b | reads_b),
        (writes_b, writes_a | reads_a),
    ):
        if any(_overlap(w, t) for w in writes for t in touched):
            return ""
    return (
        f"equivalent: `{_label(first)}` writes {', '.join(sorted(writes_a))} and "
        f"`{_label(second)}` writes {', '.join(sorted(writes_b))}; neither reads "
        "what the other writes, and neither calls anything"
    )


@dataclass(frozen=True)
class Rewrite:
    """A named mutant: statements of one class, found by their normalised
    text (``ast.unparse``), each replaced by lines (at its indent)."""

    name: str
    description: str
    edits: tuple[tuple[str, tuple[str, ...]], ...]

    def make(self, source: str, cls: str) -> SourceMutant:
        for statement_text, replacement in self.edits:
            module = ast.parse(source)
            owner = next(
                (
                    n
                    for n in ast.walk(module)
                    if isinstance(n, ast.ClassDef) and n.name == cls
                ),
                None,
            )
            if owner is None:
                raise MutationError(f"{self.name}: no class {cls}")
            hits = [
                s
                for block in _body_lists(owner)
                for s in block
                if _matches(s, statement_text)
            ]
            if len(hits) != 1:
                raise MutationError(
                    f"{self.name}: expected one `{statement_text}` in {cls}, "
                    f"found {len(hits)}"
                )
            lines = source.splitlines(keepends=True)
            new = [line + "\n" for line in replacement]
            source = "".join(_replace(lines, hits[0], new))
        lines = source.splitlines(keepends=True)
        return SourceMutant(self.name, self.description, _compiled(self.name, lines))


def _matches(statement: ast.stmt, text: str) -> bool:
    """``def NAME`` names a method; anything else is a statement's text."""
    if text.startswith("def ") and "(" not in text:
        return isinstance(statement, ast.FunctionDef) and statement.name == text[4:]
    return ast.unparse(statement) == ast.unparse(ast.parse(text))
