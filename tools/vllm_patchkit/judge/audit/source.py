"""An index of a vLLM tree's source, read with ``ast`` and never imported.

The static pass needs to resolve names across modules: a builder's base
class, a module function it calls, ``CommonAttentionMetadata`` wherever the
release keeps it. This module parses every module under ``vllm/`` once and
answers those questions.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from vllm_overlay.metadata_writes import dotted
from vllm_overlay.tree_files import NotRead, read_python

METADATA_CLASS = "CommonAttentionMetadata"
MAX_SOURCE_BYTES = 2_000_000
"""Larger modules are not read: vLLM's largest (gpu_model_runner.py, 0.28.0)
is 0.36 MB, and a 150 MB file of one-line builder classes took the pass past
14 minutes and 12.9 GB. A module skipped is named as a check that could not
run, so the verdict cannot be a pass."""


_CLASS = re.compile(r"^\s*class\s+(\w+)", re.MULTILINE)


@dataclass
class Module:
    name: str  # dotted, e.g. vllm.v1.attention.backends.rocm_attn
    path: str  # relative to the tree root
    tree: ast.Module
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    imports: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Local name -> (module, name) for ``from module import name [as local]``."""


@dataclass(frozen=True)
class ClassRef:
    module: Module
    node: ast.ClassDef

    @property
    def name(self) -> str:
        return self.node.name


class SourceIndex:
    """The modules of a tree, parsed when first needed.

    Every file is read once, as Python reads it (:mod:`vllm_overlay.tree_files`:
    regular files only, bounded, decoded by their declaration or BOM), and
    scanned as text (class names, whether it may hold a builder); only the
    modules the analysis reaches are parsed, which keeps a whole-tree pass to
    seconds. A module that is not read, or does not parse, is in
    :attr:`not_read` with why: its writes are unseen.
    """

    def __init__(self, root: Path, package: str = "vllm") -> None:
        self.root = root
        self.texts: dict[str, str] = {}  # module name -> source
        self.paths: dict[str, str] = {}  # module name -> path relative to root
        self.by_class_name: dict[str, list[str]] = {}  # class -> module names
        self.not_read: dict[str, str] = {}  # path relative to root -> why
        self._parsed: dict[str, Module | None] = {}
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if path.is_dir():
                continue  # a directory named *.py is no module
            try:
                text = read_python(path, MAX_SOURCE_BYTES)
            except NotRead as exc:
                self.not_read[rel] = (
                    exc.why
                    if exc.size is None
                    else f"{exc.size / 1e6:.1f} MB, past the "
                    f"{MAX_SOURCE_BYTES / 1e6:.0f} MB bound on a module "
                    "the static pass reads"
                )
                continue
            parts = rel.removesuffix(".py").split("/")
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join(parts)
            self.texts[name] = text
            self.paths[name] = rel
            for cls in _CLASS.findall(text):
                self.by_class_name.setdefault(cls, []).append(name)

    def module(self, name: str) -> Module | None:
        if name not in self._parsed:
            self._parsed[name] = None
            text = self.texts.get(name)
            if text is not None:
                try:
                    tree = ast.parse(text, filename=self.paths[name])
                except (SyntaxError, ValueError) as exc:
                    line = getattr(exc, "lineno", None)
                    at = f" at line {line}" if line else ""
                    self.not_read[self.paths[name]] = (
                        f"does not parse ({type(exc).__name__}{at})"
                    )
                else:
                    module = Module(name, self.paths[name], tree)
                    _index(module)
                    self._parsed[name] = module
        return self._parsed[name]

    def modules_where(self, test: Callable[[str], bool]) -> list[Module]:
        """Parsed modules whose source text passes ``test``."""
        found = []
        for name, text in self.texts.items():
            if test(text) and (module := self.module(name)):
                found.append(module)
        return found

    def mentioning(self, names: Iterable[str]) -> list[Module]:
        """Parsed modules whose source text holds one of ``names``."""
        wanted = tuple(names)
        return self.modules_where(lambda text: any(n in text for n in wanted))

    def classes_named(self, name: str) -> list[ClassRef]:
        refs = []
        for module_name in self.by_class_name.get(name, []):
            module = self.module(module_name)
            if module is not None and name in module.classes:
                refs.append(ClassRef(module, module.classes[name]))
        return refs

    def resolve_class(self, module: Module, name: str) -> ClassRef | None:
        """The class ``name`` means in ``module``: its own, imported, or unique."""
        if name in module.classes:
            return ClassRef(module, module.classes[name])
        if name in module.imports:
            source, real = module.imports[name]
            target = self.module(source)
            if target is not None and real in target.classes:
                return ClassRef(target, target.classes[real])
            name = real
        candidates = self.classes_named(name)
        return candidates[0] if len(candidates) == 1 else None

    def resolve_function(
        self, module: Module, name: str
    ) -> tuple[Module, ast.FunctionDef] | None:
        """A module-level function ``name`` as seen from ``module``."""
        if name in module.functions:
            return module, module.functions[name]
        if name in module.imports:
            source, real = module.imports[name]
            target = self.module(source)
            if target is not None and real in target.functions:
                return target, target.functions[real]
        return None

    def bases(self, cls: ClassRef) -> list[ClassRef]:
        found = []
        for base in cls.node.bases:
            if isinstance(base, ast.Subscript):  # Generic[T], Builder[M]
                base = base.value
            name = dotted(base)
            if name is None:
                continue
            ref = self.resolve_class(cls.module, name.rsplit(".", 1)[-1])
            if ref is not None and ref != cls:
                found.append(ref)
        return found

    def mro(self, cls: ClassRef) -> list[ClassRef]:
        """The class and its tree-defined bases, depth first, each once."""
        order: list[ClassRef] = []
        stack = [cls]
        while stack:
            current = stack.pop(0)
            if any(c.node is current.node for c in order):
                continue
            order.append(current)
            stack[0:0] = self.bases(current)
        return order

    def find_method(
        self, cls: ClassRef, name: str, after: ClassRef | None = None
    ) -> tuple[ClassRef, ast.FunctionDef] | None:
        """``name`` looked up along ``cls``'s MRO (after ``after``, for super())."""
        order = self.mro(cls)
        if after is not None:
            idx = next((i for i, c in enumerate(order) if c.node is after.node), -1)
            order = order[idx + 1 :]
        for ref in order:
            for node in ref.node.body:
                if isinstance(node, ast.FunctionDef) and node.name == name:
                    return ref, node
        return None

    def metadata_fields(self) -> tuple[ClassRef | None, set[str]]:
        """The shared metadata class and its field (and property) names."""
        for ref in self.classes_named(METADATA_CLASS):
            names: set[str] = set()
            for node in ref.node.body:
                if isinstance(node, ast.AnnAssign) and isinstance(
                    node.target, ast.Name
                ):
                    names.add(node.target.id)
                elif isinstance(node, ast.FunctionDef) and any(
                    dotted(d) == "property" for d in node.decorator_list
                ):
                    names.add(node.name)
            if names:
                return ref, names
        return None, set()


def _index(module: Module) -> None:
    package = (
        module.name
        if module.path.endswith("__init__.py")
        else module.name.rpartition(".")[0]
    )
    for node in module.tree.body:
        if isinstance(node, ast.FunctionDef):
            module.functions[node.name] = node
    for node in ast.walk(module.tree):
        # Classes made inside factories (a builder subclassing whatever
        # backend it wraps) are builders too: index every class, nested or not.
        if isinstance(node, ast.ClassDef):
            module.classes.setdefault(node.name, node)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                module.imports[alias.asname or alias.name] = (base, alias.name)
