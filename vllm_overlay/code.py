"""How a fix reads the code it patches: one type and one set of words for all.

Every fix reads one place of vLLM by its AST, never by importing it (cheap
at plugin registration, safe on a tree that cannot be imported, exact about
what it saw), and says what it found as a :class:`Code`, which the overlay,
the toolkit's rules and the doctors read the same way for every fix. The
readers' shared AST helpers are here too.
"""

from __future__ import annotations

import ast
import enum
import functools
from dataclasses import dataclass
from pathlib import Path

TYPE_CHECKING = False  # typing costs every start-up; annotations only
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    C = TypeVar("C", bound="Code")
    D = TypeVar("D", ast.FunctionDef, ast.ClassDef)
    F = TypeVar("F", bound=Callable[..., object])

V1_RUNNER = Path("vllm/v1/worker/gpu_model_runner.py")
"""The V1 model runner's file (gone from 0.34.0: Model Runner V2 only),
which more than one fix's reader reads."""


class Shape(enum.StrEnum):
    """What a fix's reader found where the fix applies."""

    FIXED = "fixed"
    """The fixed code: upstream's fix, or the series' patch, is in it."""
    BUGGY = "buggy"
    """The known bug the fix removes."""
    NOT_FOR = "not-for"
    """Code of a release the fix is not for: the bug cannot happen there
    (0.11.0's ROCm capture zeroes no offsets), or the patch does not fit it."""
    UNKNOWN = "unknown"
    """The code is there, but neither shape can be proven (a vendor's change,
    an alias, a rebinding): cannot judge, so never touched."""
    UNPARSEABLE = "unparseable"
    """The file is not valid Python (conflict markers, a broken edit)."""
    MISSING = "missing"
    """No such file, class or method: the release predates it, or a fork
    moved it."""

    @property
    def judged(self) -> bool:
        """Whether the code could be read and proven one way or the other."""
        return self not in (Shape.UNKNOWN, Shape.UNPARSEABLE)


@dataclass(frozen=True)
class Code:
    """A fix's verdict on the code it patches, with where it looked."""

    shape: Shape
    file: Path
    line: int | None
    detail: str

    @property
    def affected(self) -> bool:
        """The code has the bug (the overlay installs the fix)."""
        return self.shape is Shape.BUGGY

    @property
    def judged(self) -> bool:
        """False when the code could not be read or proven, so no verdict holds."""
        return self.shape.judged


def tree_reader(
    relative: Path, read: Callable[[bytes, Path], C], kind: type[C]
) -> Callable[[Path], C]:
    """``read`` on the file ``relative`` of a vLLM source tree (or install
    root), a ``kind`` MISSING without it. One reading per file content:
    ``check`` reads the same tree's file for the carry rules, the version's
    contradiction and the invariants, so what a reading holds is only read."""
    cached = functools.lru_cache(maxsize=8)(read)

    @reads(relative)
    def read_tree(tree: Path) -> C:
        file = tree / relative
        if not file.is_file():
            return kind(Shape.MISSING, file, None, f"no {relative}")
        return cached(file.read_bytes(), file)

    return read_tree


def reads(*files: Path) -> Callable[[F], F]:
    """Declares that a reading of a tree reads only these of its files, so
    that the toolkit may keep its verdict by their content across runs (one
    too few would be a stale verdict: ``tests/unit/test_declared_reads.py``
    watches every open)."""

    def declare(read: F) -> F:
        read.tree_files = files  # type: ignore[attr-defined]
        return read

    return declare


def declared_reads(read: object) -> tuple[Path, ...] | None:
    """The files ``read`` declared with :func:`reads` (None: it did not)."""
    files = getattr(read, "tree_files", None)
    return files if isinstance(files, tuple) else None


@functools.lru_cache(maxsize=4)
def parse_module(source: bytes, file: Path) -> ast.Module:
    """One parse per content of a file that more than one fix's rule reads
    (the V1 runner, thousands of lines): its readers only walk the tree.
    Raises SyntaxError or ValueError as :func:`ast.parse` does."""
    return ast.parse(source, filename=str(file))


def parse_source(source: str | bytes, file: Path) -> ast.Module | Code:
    """The whole module's AST, or an UNPARSEABLE verdict saying where it fails."""
    try:
        return ast.parse(source, filename=str(file))
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        message = getattr(exc, "msg", None) or str(exc)
        return Code(
            Shape.UNPARSEABLE,
            file,
            line,
            f"unparseable: SyntaxError at line {line}: {message}"
            if line
            else f"unparseable: {message}",
        )


def module_scope(module: ast.Module) -> list[ast.stmt]:
    """The statements of the module's own scope, in order (in if/try/with/for
    too; not inside a function or class)."""
    found: list[ast.stmt] = []

    def visit(statements: list[ast.stmt]) -> None:
        for statement in statements:
            found.append(statement)
            if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if isinstance(statement, ast.ClassDef):
                continue
            for block in ("body", "orelse", "finalbody"):
                visit(getattr(statement, block, []))
            for handler in getattr(statement, "handlers", []):
                visit(handler.body)

    visit(module.body)
    return found


def top_level_bindings(module: ast.Module, name: str) -> list[ast.stmt]:
    """Module-level statements that bind ``name`` (inside if/try/with too)."""
    return [statement for statement in module_scope(module) if binds(statement, name)]


def binds(statement: ast.stmt, name: str) -> bool:
    """Whether the statement itself (not a nested scope) binds ``name``."""
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return statement.name == name
    if isinstance(statement, ast.Import | ast.ImportFrom):
        return any(
            (alias.asname or alias.name.split(".")[0]) == name
            for alias in statement.names
        )
    targets: list[ast.AST] = []
    if isinstance(statement, ast.Assign):
        targets = list(statement.targets)
    elif isinstance(statement, ast.AnnAssign | ast.AugAssign | ast.For | ast.AsyncFor):
        targets = [statement.target]
    elif isinstance(statement, ast.With | ast.AsyncWith):
        targets = [i.optional_vars for i in statement.items if i.optional_vars]
    elif isinstance(statement, ast.Delete):
        targets = list(statement.targets)
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, ast.Name) and node.id == name:
                return True
    # A walrus binds in the enclosing scope; counting nested ones too only
    # errs towards "unknown".
    return any(
        isinstance(node, ast.NamedExpr) and node.target.id == name
        for node in ast.walk(statement)
    )


def is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _last_definition(body: list[ast.stmt], kind: type[D], name: str) -> D | None:
    """The last ``kind`` statement named ``name`` in ``body``: the one Python
    keeps when a name is defined twice."""
    found = [node for node in body if isinstance(node, kind) and node.name == name]
    return found[-1] if found else None


def method_def(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    """Method ``name`` of ``cls``: its last definition, the one Python keeps."""
    return _last_definition(cls.body, ast.FunctionDef, name)


def find_class(module: ast.Module, name: str) -> ast.ClassDef | None:
    """The class ``name`` the module ends up with (its last top-level definition)."""
    return _last_definition(module.body, ast.ClassDef, name)


def find_method(module: ast.Module, qualname: str) -> ast.FunctionDef | None:
    """``Class.method`` of ``module``: the method Python keeps (the last
    definition in the last top-level class of that name)."""
    class_name, _, name = qualname.partition(".")
    found = find_class(module, class_name)
    return method_def(found, name) if found else None
