"""Which builder ``ROCM_AITER_UNIFIED_ATTN`` hands out, read from the AST.

vLLM 0.11.1 to 0.28.0 hand it the generic ``RocmAttentionMetadataBuilder``,
whose capture zeroes the device query offsets that AITER unified attention
reads on every replay; 0.29.0 (#53821) gives it a builder of its own, whose
capture the one analysis of metadata writes reads (``offsets_problems``).
Only one shape is the bug (BUGGY): ``get_builder_cls`` is a plain static
method whose body is exactly ``return RocmAttentionMetadataBuilder``, that
name bound in the module only by its unaliased import from ``rocm_attn``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from vllm_overlay.code import (
    Code,
    Shape,
    binds,
    is_name,
    method_def,
    parse_source,
    top_level_bindings,
    tree_reader,
)
from vllm_overlay.fixes.rocm_capture_host_offsets.code import (
    BUILDER_CLASS,
    CAPTURE_METHOD,
    offsets_problems,
)

AITER_UNIFIED_ATTN = Path("vllm/v1/attention/backends/rocm_aiter_unified_attn.py")
AITER_MODULE = "vllm.v1.attention.backends.rocm_aiter_unified_attn"
GENERIC_MODULE = "vllm.v1.attention.backends.rocm_attn"
BACKEND_CLASS = "RocmAiterUnifiedAttentionBackend"
BUILDER_METHOD = "get_builder_cls"


@dataclass(frozen=True)
class AiterCode(Code):
    """What ``RocmAiterUnifiedAttentionBackend.get_builder_cls`` hands out:
    BUGGY, the generic ROCm builder imported from rocm_attn (0.11.1-0.28.0);
    FIXED, a builder class of this file whose capture leaves both offsets
    alone (0.29.0+, #53821); MISSING, no such module (0.11.0) or class."""

    method: ast.FunctionDef | None = field(default=None, compare=False, repr=False)
    """For BUGGY: the ``get_builder_cls`` definition that was read; for
    FIXED: the own builder's capture method."""
    builder: str | None = None
    """For FIXED: the name of the builder class handed out."""


def inspect_aiter_source(source: str | bytes, file: Path) -> AiterCode:
    """Classify the backend's ``get_builder_cls`` in ``source``."""
    module = parse_source(source, file)
    if not isinstance(module, ast.Module):
        return AiterCode(Shape.UNPARSEABLE, file, module.line, module.detail)
    backends = top_level_bindings(module, BACKEND_CLASS)
    if not backends:
        return AiterCode(Shape.MISSING, file, None, f"no {BACKEND_CLASS}")
    backend = backends[0]
    if len(backends) > 1 or not isinstance(backend, ast.ClassDef):
        return _unknown(
            file, backend.lineno, f"{BACKEND_CLASS} is not one class definition"
        )
    defined = [node for node in backend.body if binds(node, BUILDER_METHOD)]
    if not defined:
        return _unknown(
            file,
            backend.lineno,
            f"{BACKEND_CLASS} defines no {BUILDER_METHOD} of its own",
        )
    method = defined[0]
    where = f"{file}:{method.lineno} {BACKEND_CLASS}.{BUILDER_METHOD}"
    if len(defined) > 1 or not isinstance(method, ast.FunctionDef):
        return _unknown(
            file, method.lineno, f"{where} is not one plain method definition"
        )
    returned = _returned_name(method)
    if returned is None:
        return _unknown(
            file, method.lineno, f"{where}: the body is not one `return <name>`"
        )
    if not _plain_staticmethod(method):
        return _unknown(file, method.lineno, f"{where}: not a plain @staticmethod")
    if returned == BUILDER_CLASS:
        text = source if isinstance(source, str) else source.decode("utf-8", "replace")
        return _shared(module, method, file, where, "global" in text)
    return _own_builder(module, returned, method, file, where)


inspect_aiter_tree = tree_reader(AITER_UNIFIED_ATTN, inspect_aiter_source, AiterCode)
"""The verdict in the vLLM source tree (or install root) at a path (the
definition it holds is only read: an install plans from
:func:`inspect_aiter_source`'s own)."""


def _shared(
    module: ast.Module,
    method: ast.FunctionDef,
    file: Path,
    where: str,
    may_declare_global: bool,
) -> AiterCode:
    bindings = top_level_bindings(module, BUILDER_CLASS)
    imported = [b for b in bindings if _imports_generic_builder(b)]
    # The walk for `global` costs half a parse: only when the word is there.
    declared = may_declare_global and _declared_global(module)
    if len(bindings) != 1 or len(imported) != 1 or declared:
        lines = sorted({b.lineno for b in bindings})
        return _unknown(
            file,
            method.lineno,
            f"{where} returns {BUILDER_CLASS}, but the module binds that name "
            f"at line(s) {lines}, not only by `from {GENERIC_MODULE} import "
            f"{BUILDER_CLASS}`",
        )
    return AiterCode(
        Shape.BUGGY,
        file,
        method.lineno,
        f"{where} hands out the generic {BUILDER_CLASS} (imported from "
        f"{GENERIC_MODULE} at line {imported[0].lineno}), not a builder of "
        "its own",
        method,
    )


def _own_builder(
    module: ast.Module, name: str, method: ast.FunctionDef, file: Path, where: str
) -> AiterCode:
    bindings = top_level_bindings(module, name)
    if len(bindings) != 1 or not isinstance(bindings[0], ast.ClassDef):
        return _unknown(
            file,
            method.lineno,
            f"{where} returns {name}, which is not one builder class defined "
            "in this file",
        )
    builder = bindings[0]
    captures = [n for n in builder.body if binds(n, CAPTURE_METHOD)]
    capture = method_def(builder, CAPTURE_METHOD)
    problems = offsets_problems(capture) if capture else []
    if len(captures) != 1 or capture is None or problems:
        return _unknown(
            file,
            builder.lineno,
            f"{where} returns {name} (line {builder.lineno}), whose "
            f"{CAPTURE_METHOD} is not one method that leaves both query "
            "offsets alone" + "".join(f"; {p}" for p in problems),
        )
    return AiterCode(
        Shape.FIXED,
        file,
        method.lineno,
        f"{where} hands out its own {name} (line {builder.lineno}), whose "
        f"{CAPTURE_METHOD} leaves query_start_loc and query_start_loc_cpu alone",
        capture,
        name,
    )


def _unknown(file: Path, line: int, detail: str) -> AiterCode:
    return AiterCode(Shape.UNKNOWN, file, line, detail)


def _returned_name(method: ast.FunctionDef) -> str | None:
    body = method.body
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]  # the docstring
    if len(body) == 1 and isinstance(body[0], ast.Return):
        value = body[0].value
        if isinstance(value, ast.Name):
            return value.id
    return None


def _plain_staticmethod(method: ast.FunctionDef) -> bool:
    args = method.args
    no_params = not (
        args.posonlyargs or args.args or args.vararg or args.kwonlyargs or args.kwarg
    )
    decorators = method.decorator_list
    return no_params and len(decorators) == 1 and is_name(decorators[0], "staticmethod")


def _imports_generic_builder(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.ImportFrom)
        and node.module == GENERIC_MODULE
        and node.level == 0
        and any(a.name == BUILDER_CLASS and a.asname is None for a in node.names)
    )


def _declared_global(module: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Global) and BUILDER_CLASS in node.names
        for node in ast.walk(module)
    )
