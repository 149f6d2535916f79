"""The #51585 fix as one statement taken out of the user's own method.

The overlay carries no copy of vLLM's ``build_for_cudagraph_capture``: a
vendor build's method (AMD's fork changes this file) would lose every line
the copy lacks. It removes the host zeroing from the method as installed,
once an AST diff shows that statement alone removed
(:func:`removed_statements`) and an equal code object shows vLLM's loaded
method was compiled from the source read (:func:`fixed_function`). What
cannot be proven raises :class:`FixRefused`, naming the file, line and why.
"""

from __future__ import annotations

import ast
import copy
import types
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from vllm_overlay.arming import logger
from vllm_overlay.code import Shape
from vllm_overlay.fixes.rocm_capture_host_offsets import RECORD
from vllm_overlay.fixes.rocm_capture_host_offsets.code import (
    BUILDER_CLASS,
    CAPTURE_METHOD,
    HOST_OFFSETS,
    CaptureCode,
    classify_method,
)
from vllm_overlay.metadata_writes import dotted
from vllm_overlay.proof import (
    FUTURE_FLAGS,
    FixRefused,
    compile_method,
    prove_compiled_from,
)
from vllm_overlay.state import InstallState

FIX_MARKER = "__vllm_overlay_fix__"
"""Attribute set on the fixed method, so an install can tell it is done."""
ORIGINAL_ATTR = "__vllm_overlay_original__"
"""The method the fix was derived from, kept on the fixed one."""


@dataclass(frozen=True)
class FixPlan:
    """The installed method and the same method without the host zeroing."""

    file: Path
    method: ast.FunctionDef
    fixed: ast.FunctionDef
    removed_line: int
    removed_source: str

    @property
    def summary(self) -> str:
        return (
            f"{self.file}:{self.removed_line} `{self.removed_source}` removed from "
            f"{BUILDER_CLASS}.{CAPTURE_METHOD}; every other line kept as installed"
        )

    @property
    def removes(self) -> dict[str, object]:
        """The one statement it takes out of vLLM's code (the doctor's
        ``removes``; the other fixes' plans remove none)."""
        return {
            "file": str(self.file),
            "line": self.removed_line,
            "statement": self.removed_source,
        }


def plan_fix(method: ast.FunctionDef, code: CaptureCode) -> FixPlan:
    """Plan the removal of the host zeroing from a BUGGY ``method``."""
    where = f"{code.file}:{method.lineno} {BUILDER_CLASS}.{CAPTURE_METHOD}"
    if code.shape is not Shape.BUGGY:
        raise FixRefused(
            f"{where}: shape {code.shape}, not the known bug ({code.detail})"
        )
    if method.decorator_list:
        raise FixRefused(f"{where}: decorated; the overlay only edits a plain method")
    metadata = method.args.args[1].arg
    fixed = copy.deepcopy(method)
    hits = [
        (body, index)
        for node in ast.walk(fixed)
        for body in _statement_lists(node)
        for index, statement in enumerate(body)
        if _zeroes_host_offsets(statement, metadata)
    ]
    if len(hits) != 1:
        raise FixRefused(
            f"{where}: {len(hits)} statements of the form "
            f"`{metadata}.{HOST_OFFSETS}.zero_()`, expected exactly one"
        )
    body, index = hits[0]
    statement = body[index]
    if code.host_mutation_lines != (statement.lineno,):
        raise FixRefused(
            f"{where}: {HOST_OFFSETS} is also changed at line(s) "
            f"{list(code.host_mutation_lines)}, not only by the statement at line "
            f"{statement.lineno}"
        )
    if len(body) == 1:
        raise FixRefused(
            f"{code.file}:{statement.lineno}: removing the host zeroing would leave "
            "an empty block"
        )
    del body[index]
    removed = removed_statements(method, fixed)
    if removed is None or [ast.dump(s) for s in removed] != [ast.dump(statement)]:
        raise FixRefused(f"{where}: the AST diff is not exactly one statement")
    if classify_method(fixed, code.file).shape is not Shape.FIXED:
        raise FixRefused(
            f"{where}: the method without line {statement.lineno} is "
            "not the fixed shape"
        )
    return FixPlan(code.file, method, fixed, statement.lineno, ast.unparse(statement))


def _statement_lists(node: ast.AST) -> list[list[ast.stmt]]:
    lists = []
    for field in ("body", "orelse", "finalbody"):
        value = getattr(node, field, None)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            lists.append(value)
    return lists


def _zeroes_host_offsets(statement: ast.stmt, metadata: str) -> bool:
    """``<metadata>.query_start_loc_cpu.zero_()`` (or ``.fill_(0)``) alone."""
    if not isinstance(statement, ast.Expr) or not isinstance(statement.value, ast.Call):
        return False
    call, host = statement.value, f"{metadata}.{HOST_OFFSETS}"
    if call.keywords:
        return False
    if dotted(call.func) == f"{host}.zero_":
        return not call.args
    return (
        dotted(call.func) == f"{host}.fill_"
        and len(call.args) == 1
        and isinstance(call.args[0], ast.Constant)
        and type(call.args[0].value) is int
        and call.args[0].value == 0
    )


def removed_statements(old: ast.AST, new: ast.AST) -> list[ast.stmt] | None:
    """The statements deleted from ``old`` to give ``new``; None if anything
    else differs (positions are ignored, every other field is compared)."""
    if type(old) is not type(new):
        return None
    removed: list[ast.stmt] = []
    for name, old_value in ast.iter_fields(old):
        new_value = getattr(new, name, None)
        if isinstance(old_value, list) and isinstance(new_value, list):
            if any(isinstance(v, ast.stmt) for v in old_value + new_value):
                found = _aligned_removals(old_value, new_value)
            elif len(old_value) == len(new_value):
                found = []
                for a, b in zip(old_value, new_value, strict=True):
                    part = _value_removals(a, b)
                    if part is None:
                        return None
                    found += part
            else:
                return None
        else:
            found = _value_removals(old_value, new_value)
        if found is None:
            return None
        removed += found
    return removed


def _value_removals(old: Any, new: Any) -> list[ast.stmt] | None:
    if isinstance(old, ast.AST):
        return removed_statements(old, new)
    return [] if type(old) is type(new) and old == new else None


def _aligned_removals(
    old: list[ast.stmt], new: list[ast.stmt]
) -> list[ast.stmt] | None:
    removed: list[ast.stmt] = []
    j = 0
    for statement in old:
        inner = removed_statements(statement, new[j]) if j < len(new) else None
        if inner is None:
            removed.append(statement)
        else:
            removed += inner
            j += 1
    return removed if j == len(new) else None


def fixed_function(plan: FixPlan, live: Any) -> types.FunctionType:
    """The fixed method for vLLM's loaded class, whose method is ``live``."""
    where = f"{plan.file}:{plan.method.lineno} {BUILDER_CLASS}.{CAPTURE_METHOD}"
    if not isinstance(live, types.FunctionType):
        raise FixRefused(
            f"{where}: the loaded class holds {type(live).__name__}, not the "
            "plain function in the file (replaced or wrapped by someone else)"
        )
    code = live.__code__
    flags = code.co_flags & FUTURE_FLAGS
    prove_compiled_from(live, plan.method, plan.file, BUILDER_CLASS, where)
    fixed_code = compile_method(plan.fixed, plan.file, flags, BUILDER_CLASS)
    if fixed_code.co_freevars != code.co_freevars:
        raise FixRefused(f"{where}: removing the statement changed the closure")
    fixed = types.FunctionType(
        fixed_code, live.__globals__, live.__name__, live.__defaults__, live.__closure__
    )
    fixed.__kwdefaults__ = copy.copy(live.__kwdefaults__)
    fixed.__annotations__ = dict(live.__annotations__)
    fixed.__qualname__ = live.__qualname__
    fixed.__module__ = live.__module__
    fixed.__doc__ = live.__doc__
    fixed.__dict__.update(live.__dict__)
    setattr(fixed, FIX_MARKER, True)
    setattr(fixed, ORIGINAL_ATTR, live)
    return fixed


def is_installed_on(module: Any) -> bool:
    """Whether ``module``'s builder class carries the overlay's fixed method."""
    method = getattr(getattr(module, BUILDER_CLASS, None), CAPTURE_METHOD, None)
    return bool(getattr(method, FIX_MARKER, False))


def install(module: ModuleType, state: InstallState) -> None:
    """Install the fixed method on vLLM's builder class if the loaded class is
    the inspected code (:class:`FixRefused` otherwise).

    Patching the class itself, rather than registering a subclass as the
    backend, is what reaches every path in ``RECORD.reaches``.
    """
    plan = state.plan
    assert isinstance(plan, FixPlan)
    owner_name, method_name = RECORD.qualname.split(".")
    owner = getattr(module, owner_name, None)
    live = owner.__dict__.get(method_name) if isinstance(owner, type) else None
    if getattr(live, FIX_MARKER, False):
        state.applied_to_class = True
        return
    fixed = fixed_function(plan, live)
    setattr(owner, method_name, fixed)
    state.applied_to_class = owner.__dict__.get(method_name) is fixed
    if not state.applied_to_class:
        problem = f"{RECORD.target} did not take the fixed method"
        state.problems.append(problem)
        logger.warning("vllm-overlay: fix not installed: %s", problem)
        return
    logger.info(
        "vllm-overlay: installed the #51585 capture fix on vLLM %s: %s",
        state.vllm_version,
        plan.summary,
    )
