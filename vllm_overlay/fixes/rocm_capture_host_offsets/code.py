"""The shape of ``RocmAttentionMetadataBuilder.build_for_cudagraph_capture``.

Read from the source's AST, never imported (:mod:`vllm_overlay.code`); a
file that does not parse is UNPARSEABLE, never judged by the part that
parses. The overlay patches only the BUGGY shape; patch 0001's invariant is
"the shape is FIXED".

Every judged shape is a proof by the one analysis of metadata writes
(:mod:`vllm_overlay.metadata_writes`): only writes spelled on the metadata
itself (``<metadata>.<offsets>.<op>_()``, an assignment to it) make a known
shape. A write through an alias or a view, a call that receives the tensor
or the metadata, a decorator, a method rebound after its definition: any
makes it UNKNOWN ("cannot judge"). The one call that may receive the
metadata is the builder's own ``self.build``, which every release's capture
calls; when the class defines it, it is read too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from vllm_overlay.code import (
    Code,
    Shape,
    binds,
    find_class,
    find_method,
    is_name,
    method_def,
    parse_source,
    top_level_bindings,
    tree_reader,
)
from vllm_overlay.metadata_writes import (
    EMPTY,
    META,
    Taints,
    Walker,
    dotted,
)

ROCM_ATTN = Path("vllm/v1/attention/backends/rocm_attn.py")
BUILDER_CLASS = "RocmAttentionMetadataBuilder"
CAPTURE_METHOD = "build_for_cudagraph_capture"
DEVICE_OFFSETS = "query_start_loc"
HOST_OFFSETS = "query_start_loc_cpu"
OFFSETS = (DEVICE_OFFSETS, HOST_OFFSETS)
BUILD_METHOD = "build"
"""The builder's per-step entry: the one call the capture may hand the
metadata to (every release's capture starts with ``self.build(0, m)``)."""


@dataclass(frozen=True)
class CaptureCode(Code):
    """What the capture method does to the offsets (BUGGY: both zeroed, the bug
    of 0.11.1-0.28.0; FIXED: the device ones only, 0.29.0+; NOT_FOR: neither,
    code from before the #25985 band-aid, 0.11.0)."""

    host_mutation_lines: tuple[int, ...] = ()


def inspect_capture_source(source: str | bytes, file: Path) -> CaptureCode:
    """Classify the ROCm builder's capture method in ``source``."""
    return read_capture(source, file)[1]


def find_capture_method(module: ast.Module) -> ast.FunctionDef | None:
    """The builder's capture method: its last definition in the class body,
    the one Python keeps."""
    return find_method(module, f"{BUILDER_CLASS}.{CAPTURE_METHOD}")


def read_capture(
    source: str | bytes, file: Path
) -> tuple[ast.FunctionDef | None, CaptureCode]:
    """The capture method and its verdict, proven against the whole module:
    the method is what the class keeps, nothing rebinds it, and the
    ``self.build`` it hands the metadata to writes neither offsets tensor."""
    module = parse_source(source, file)
    if not isinstance(module, ast.Module):
        return None, CaptureCode(module.shape, file, module.line, module.detail)
    method = find_capture_method(module)
    code = classify_method(method, file)
    if method is None or not code.judged:
        return method, code
    problem = _module_problem(module, method)
    if problem is None:
        return method, code
    where = f"{file}:{method.lineno} {BUILDER_CLASS}.{CAPTURE_METHOD}"
    return method, CaptureCode(
        Shape.UNKNOWN,
        file,
        method.lineno,
        f"cannot judge {where} ({code.shape} on its own): {problem}",
        code.host_mutation_lines,
    )


def _module_problem(module: ast.Module, method: ast.FunctionDef) -> str | None:
    """Why the module's behaviour may differ from ``method``'s body, if it may."""
    builder = find_class(module, BUILDER_CLASS)
    assert builder is not None
    if len(top_level_bindings(module, BUILDER_CLASS)) != 1:
        return f"the module binds {BUILDER_CLASS} more than once"
    for name in (CAPTURE_METHOD, BUILD_METHOD):
        bound = [n for n in builder.body if binds(n, name)]
        if bound and bound[-1] is not method_def(builder, name):
            return f"{BUILDER_CLASS}.{name} is rebound at line {bound[-1].lineno}"
    for node in ast.walk(module):
        if _sets_builder_attribute(node):
            return f"line {node.lineno} sets an attribute of {BUILDER_CLASS}"
    build = method_def(builder, BUILD_METHOD)
    if build is None:
        return None  # inherited: not in this file (the audit reads it)
    for line, reason in _build_problems(method, build):
        return f"{BUILDER_CLASS}.{BUILD_METHOD}, called at line {line}: {reason}"
    return None


def _sets_builder_attribute(node: ast.AST) -> bool:
    """``Builder.x = ...``, ``del Builder.x`` or ``setattr(Builder, ...)``."""
    if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
        return is_name(node.value, BUILDER_CLASS)
    return (
        isinstance(node, ast.Call)
        and dotted(node.func) in ("setattr", "delattr")
        and bool(node.args)
        and is_name(node.args[0], BUILDER_CLASS)
    )


def _build_problems(
    method: ast.FunctionDef, build: ast.FunctionDef
) -> Iterator[tuple[int, str]]:
    """What keeps ``build`` from being proven to leave the host offsets
    alone and the device offsets unwritten, for each call the capture makes.
    (Handing the device offsets on to its result is what build is for.)"""
    metadata = method.args.args[1].arg
    for call in _OffsetUse(method, metadata).build_calls:
        param = _bound_parameter(call, metadata, build)
        if param is None:
            yield call.lineno, f"cannot tell which parameter gets {metadata}"
            continue
        use = _OffsetUse(build, param)
        for doubt in use.unproven():
            if doubt.fields != {DEVICE_OFFSETS} or doubt.why.startswith("writes"):
                yield call.lineno, f"line {doubt.line}: {doubt.why}"
        if use.device_mutated or use.device_rebound or use.host_mutated:
            yield call.lineno, "writes the query offsets"
        if use.build_calls:
            yield call.lineno, f"hands {param} on to self.{BUILD_METHOD}"


def _bound_parameter(
    call: ast.Call, metadata: str, callee: ast.FunctionDef
) -> str | None:
    """The callee's parameter that receives ``metadata`` in ``call``."""
    positional = [a.arg for a in [*callee.args.posonlyargs, *callee.args.args][1:]]
    for index, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            return None
        if is_name(arg, metadata):
            return positional[index] if index < len(positional) else None
    for keyword in call.keywords:
        if keyword.arg is None:
            return None
        if is_name(keyword.value, metadata):
            return keyword.arg
    return None


def classify_method(method: ast.FunctionDef | None, file: Path) -> CaptureCode:
    """Classify one capture method by its body (None: the module has none).

    :func:`read_capture` adds what only the whole module can show."""
    if method is None:
        return CaptureCode(
            Shape.MISSING, file, None, f"no {BUILDER_CLASS}.{CAPTURE_METHOD}"
        )
    params = [a.arg for a in method.args.args]
    if len(params) < 2:
        return CaptureCode(
            Shape.UNKNOWN, file, method.lineno, f"unexpected signature {params}"
        )
    use = _OffsetUse(method, params[1])
    where = f"{file}:{method.lineno} {BUILDER_CLASS}.{CAPTURE_METHOD}"
    shape, detail = _verdict(use, bool(method.decorator_list), where)
    return CaptureCode(shape, file, method.lineno, detail, tuple(use.host_mutated))


def _verdict(use: _OffsetUse, decorated: bool, where: str) -> tuple[Shape, str]:
    """The shape of a capture method whose walk is ``use``, and why."""
    if decorated:
        why = "decorated, so the class may not keep this body"
        return Shape.UNKNOWN, f"cannot judge {where}: {why}"
    unproven = use.unproven()
    if unproven:
        why = "its writes to the query offsets cannot all be seen"
        unseen = "; ".join(f"line {d.line}: {d.why}" for d in unproven)
        return Shape.UNKNOWN, f"cannot judge {where}: {why}: {unseen}"
    if use.device_rebound:
        device = f"{use.metadata}.{DEVICE_OFFSETS}"
        return Shape.UNKNOWN, f"{where} rebinds {device} (not in place)"
    zeroed, host = use.device_zeroed, use.host_mutated
    if zeroed and not host:
        why = f"zeroes {DEVICE_OFFSETS} in place and leaves {HOST_OFFSETS} alone"
        return Shape.FIXED, f"{where} {why}"
    if zeroed and host == use.host_zeroed:
        why = f"(line {', '.join(map(str, host))}) as well as {DEVICE_OFFSETS}"
        return Shape.BUGGY, f"{where} zeroes {HOST_OFFSETS} {why}"
    if not zeroed and not host:
        return Shape.NOT_FOR, f"{where} does not touch the query offsets"
    why = f"device zeroed at {list(zeroed)}, host mutated at {list(host)}"
    return Shape.UNKNOWN, f"{where}: unrecognised offset handling ({why})"


def offsets_problems(method: ast.FunctionDef) -> list[str]:
    """What keeps ``method`` from being proven to neither change nor rebind
    either offsets tensor of its metadata argument, each with its line (empty:
    proven; the capture of 0.29.0's AITER unified builder). ``self.build`` is
    the inherited ROCm one: its judgement is the ROCm capture's
    (:func:`read_capture`)."""
    params = [a.arg for a in method.args.args]
    if len(params) < 2:
        return [f"line {method.lineno}: unexpected signature {params}"]
    if method.decorator_list:
        return [f"line {method.lineno}: decorated"]
    use = _OffsetUse(method, params[1])
    unproven = use.unproven()
    seen = {doubt.line for doubt in unproven}
    direct = sorted({*use.device_mutated, *use.host_mutated} - seen)
    rebound = [f"rebinds {use.metadata}.{DEVICE_OFFSETS}"] if use.device_rebound else []
    return [
        *(f"line {doubt.line}: {doubt.why}" for doubt in unproven),
        *(f"line {line}: writes the query offsets" for line in direct),
        *rebound,
    ]


class _OffsetUse(Walker):
    """The one walk of metadata writes from a function's ``<metadata>``
    argument, read for the offsets tensors: the writes spelled on the
    metadata itself by line, everything else :meth:`Walker.unproven`. The
    one call it may hand the metadata to is ``self.build(...)``, collected
    to be read in turn."""

    def __init__(self, func: ast.FunctionDef, metadata: str) -> None:
        super().__init__(func, {metadata: frozenset({META})}, OFFSETS)
        self.metadata = metadata
        self.build_calls: list[ast.Call] = []
        self.run()
        device = [w for w in self.writes if w.field == DEVICE_OFFSETS]
        host = [w for w in self.writes if w.field == HOST_OFFSETS]
        self.device_zeroed = [w.line for w in device if w.zeroes]
        self.device_mutated = [w.line for w in device if w.op.endswith("_")]
        """Every in-place call on the device offsets (zeroing included)."""
        self.device_rebound = any(not w.op.endswith("_") for w in device)
        self.host_zeroed = [w.line for w in host if w.zeroes]
        self.host_mutated = [w.line for w in host]

    def follow(
        self,
        node: ast.Call,
        args: list[Taints],
        kwargs: dict[str | None, Taints],
        receiver: Taints,
    ) -> Taints | None:
        given = [
            *zip(node.args, args, strict=True),
            *((k.value, kwargs[k.arg]) for k in node.keywords),
        ]
        if dotted(node.func) != f"self.{BUILD_METHOD}":
            return None
        if not any(is_name(value, self.metadata) for value, _ in given):
            return None
        self.build_calls.append(node)
        others = [t for value, t in given if not is_name(value, self.metadata)]
        return None if any(others) or receiver else EMPTY


inspect_capture_tree = tree_reader(ROCM_ATTN, inspect_capture_source, CaptureCode)
"""The capture method's verdict in the vLLM source tree at a path (a
:class:`CaptureCode` holds no AST, so a shared one is safe)."""
