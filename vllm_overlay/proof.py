"""Proof that vLLM's loaded code is the code a fix read, before it changes it.

A fix decides from the source's AST at start-up and installs when vLLM
imports the module; in between the file may change, or something else may
replace the function. So every install first compiles the definition it
read the way Python compiled vLLM's file and requires an equal code object
(same byte code, constants, nested code, names and positions). Whatever
cannot be proven raises :class:`FixRefused`, whose message names the file,
the line and why; the fix is then left out, never half-installed.
"""

from __future__ import annotations
import __future__

import ast
import copy
import types
from pathlib import Path

FUTURE_FLAGS = 0
for _feature in __future__.all_feature_names:
    FUTURE_FLAGS |= getattr(__future__, _feature).compiler_flag


class FixRefused(Exception):
    """The fix cannot be proven safe here; the message says where and why."""


def prove_compiled_from(
    live: types.FunctionType,
    method: ast.FunctionDef,
    file: Path,
    owner: str | None,
    where: str,
    imports: tuple[ast.stmt, ...] = (),
) -> None:
    """Refuse, naming ``where``, unless the loaded function ``live`` was
    compiled from ``method`` of class ``owner`` (None: a module-level
    function) as it stands in ``file`` (equal code objects: same byte code,
    constants, nested code, names and positions). ``imports``: the file's
    module-level imports, which Python's compiler reads (it calls a module's
    functions without its method-call shortcut)."""
    code = live.__code__
    flags = code.co_flags & FUTURE_FLAGS
    if Path(code.co_filename).resolve() != file.resolve() or (
        compile_method(method, file, flags, owner, imports) != code
    ):
        raise FixRefused(
            f"{where}: the loaded method was not compiled from this source "
            f"(it comes from {code.co_filename}:{code.co_firstlineno}; the file "
            "changed since vLLM imported it, or someone replaced the method)"
        )


def compile_method(
    method: ast.FunctionDef,
    file: Path,
    flags: int,
    owner: str | None = None,
    imports: tuple[ast.stmt, ...] = (),
) -> types.CodeType:
    """Compile ``method`` inside a bare class named ``owner`` (None: at
    module level), never run, so its code object comes out as vLLM's own
    compile of the file made it (same qualname, positions, ``__class__``)."""
    node: ast.stmt = copy.deepcopy(method)
    if owner is not None:
        node = ast.ClassDef(
            name=owner, bases=[], keywords=[], body=[node], decorator_list=[]
        )
        if "type_params" in ast.ClassDef._fields:
            node.type_params = []  # type: ignore[attr-defined]
        ast.copy_location(node, method)
    body = [*copy.deepcopy(imports), node]
    module = ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))
    compiled = compile(module, str(file), "exec", flags=flags, dont_inherit=True)
    scope = inner_code(compiled, owner) if owner is not None else compiled
    found = inner_code(scope, method.name) if scope is not None else None
    if found is not None:
        return found
    raise FixRefused(f"{file}:{method.lineno}: compiling the method gave no code")


def inner_code(code: types.CodeType, name: str) -> types.CodeType | None:
    """The code object named ``name`` among ``code``'s constants."""
    return next(
        (
            const
            for const in code.co_consts
            if isinstance(const, types.CodeType) and const.co_name == name
        ),
        None,
    )
