"""The shape of ``RocmAttentionMetadataBuilder.build_for_cudagraph_capture``.

Read from the source's AST, never by importing it: cheap enough for plugin
registration, safe on a tree that cannot be imported, and precise about
what it saw (file and line). The whole file is parsed: a file that does not
parse (a merge in progress leaves conflict markers) is UNPARSEABLE, never
judged by the part that happens to parse. The overlay patches only the
BUGGY shape; the toolkit's invariant for patch 0001 is "the shape is FIXED".
"""

from __future__ import annotations

import ast
import enum
from dataclasses import dataclass
from pathlib import Path

ROCM_ATTN = Path("vllm/v1/attention/backends/rocm_attn.py")
BUILDER_CLASS = "RocmAttentionMetadataBuilder"
CAPTURE_METHOD = "build_for_cudagraph_capture"
DEVICE_OFFSETS = "query_start_loc"
HOST_OFFSETS = "query_start_loc_cpu"


class Shape(enum.StrEnum):
    """How ``build_for_cudagraph_capture`` treats the query offsets."""

    FIXED = "fixed"
    """Device offsets zeroed in place, host offsets untouched (0.29.0+)."""
    BUGGY = "buggy"
    """Both offsets zeroed: the bug of 0.11.1-0.28.0."""
    NO_ZEROING = "no-zeroing"
    """Neither zeroed: code from before the #25985 band-aid (0.11.0)."""
    UNKNOWN = "unknown"
    """The method exists but does something this check does not recognise."""
    UNPARSEABLE = "unparseable"
    """The file is not valid Python (conflict markers, a broken edit)."""
    MISSING = "missing"
    """No rocm_attn module, builder class or capture method."""


@dataclass(frozen=True)
class CaptureCode:
    """What the capture method does to the offsets, with source locations."""

    shape: Shape
    file: Path
    line: int | None
    detail: str
    device_zero_lines: tuple[int, ...] = ()
    host_mutation_lines: tuple[int, ...] = ()

    @property
    def affected(self) -> bool:
        return self.shape is Shape.BUGGY

    @property
    def judged(self) -> bool:
        """False when the code could not be read, so no verdict holds."""
        return self.shape is not Shape.UNPARSEABLE


def parse_source(source: str | bytes, file: Path) -> ast.Module | CaptureCode:
    """The whole module's AST, or an UNPARSEABLE verdict saying where it fails."""
    try:
        return ast.parse(source, filename=str(file))
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        message = getattr(exc, "msg", None) or str(exc)
        return CaptureCode(
            Shape.UNPARSEABLE,
            file,
            line,
            f"unparseable: SyntaxError at line {line}: {message}"
            if line
            else f"unparseable: {message}",
        )


def inspect_capture_source(source: str | bytes, file: Path) -> CaptureCode:
    """Classify the ROCm builder's capture method in ``source``."""
    module = parse_source(source, file)
    if isinstance(module, CaptureCode):
        return module
    return classify_method(find_capture_method(module), file)


def find_capture_method(module: ast.Module) -> ast.FunctionDef | None:
    """The builder's capture method, defined directly in the class body."""
    for node in module.body:
        if isinstance(node, ast.ClassDef) and node.name == BUILDER_CLASS:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == CAPTURE_METHOD:
                    return item
    return None


def classify_method(method: ast.FunctionDef | None, file: Path) -> CaptureCode:
    """Classify one capture method (None: the module has none)."""
    if method is None:
        return CaptureCode(
            Shape.MISSING, file, None, f"no {BUILDER_CLASS}.{CAPTURE_METHOD}"
        )
    params = [a.arg for a in method.args.args]
    if len(params) < 2:
        return CaptureCode(
            Shape.UNKNOWN, file, method.lineno, f"unexpected signature {params}"
        )
    metadata = params[1]
    visitor = _OffsetUse(metadata)
    visitor.visit(method)
    where = f"{file}:{method.lineno} {BUILDER_CLASS}.{CAPTURE_METHOD}"
    common = {
        "file": file,
        "line": method.lineno,
        "device_zero_lines": tuple(visitor.device_zeroed),
        "host_mutation_lines": tuple(visitor.host_mutated),
    }
    if visitor.device_rebound:
        return CaptureCode(
            Shape.UNKNOWN,
            detail=f"{where} rebinds {metadata}.{DEVICE_OFFSETS} (not in place)",
            **common,
        )
    if visitor.device_zeroed and not visitor.host_mutated:
        return CaptureCode(
            Shape.FIXED,
            detail=f"{where} zeroes {DEVICE_OFFSETS} in place and leaves "
            f"{HOST_OFFSETS} alone",
            **common,
        )
    if visitor.device_zeroed and visitor.host_mutated == visitor.host_zeroed:
        return CaptureCode(
            Shape.BUGGY,
            detail=f"{where} zeroes {HOST_OFFSETS} (line "
            f"{', '.join(map(str, visitor.host_mutated))}) as well as "
            f"{DEVICE_OFFSETS}",
            **common,
        )
    if not visitor.device_zeroed and not visitor.host_mutated:
        return CaptureCode(
            Shape.NO_ZEROING,
            detail=f"{where} does not touch the query offsets",
            **common,
        )
    return CaptureCode(
        Shape.UNKNOWN,
        detail=f"{where}: unrecognised offset handling (device zeroed at "
        f"{list(visitor.device_zeroed)}, host mutated at "
        f"{list(visitor.host_mutated)})",
        **common,
    )


def leaves_offsets_alone(method: ast.FunctionDef) -> bool:
    """Whether ``method`` neither changes nor rebinds either offsets tensor
    of its metadata argument (the capture of 0.29.0's AITER unified builder)."""
    params = [a.arg for a in method.args.args]
    if len(params) < 2:
        return False
    visitor = _OffsetUse(params[1])
    visitor.visit(method)
    return not (
        visitor.device_mutated or visitor.device_rebound or visitor.host_mutated
    )


def inspect_capture_tree(tree: Path) -> CaptureCode:
    """Classify the capture method of the vLLM source tree at ``tree``."""
    file = tree / ROCM_ATTN
    if not file.is_file():
        return CaptureCode(Shape.MISSING, file, None, f"no {ROCM_ATTN} in {tree}")
    return inspect_capture_source(file.read_bytes(), file)


class _OffsetUse(ast.NodeVisitor):
    """Records zeroing and other mutation of ``<metadata>.<offsets>``."""

    def __init__(self, metadata: str) -> None:
        self.metadata = metadata
        self.device_zeroed: list[int] = []
        self.device_mutated: list[int] = []
        """Every in-place call on the device offsets (zeroing included)."""
        self.device_rebound = False
        self.host_zeroed: list[int] = []
        self.host_mutated: list[int] = []

    def _offsets_attr(self, node: ast.AST) -> str | None:
        """``query_start_loc`` or ``..._cpu`` if node is (a slice of) one."""
        while isinstance(node, ast.Subscript):
            node = node.value
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == self.metadata
            and node.attr in (DEVICE_OFFSETS, HOST_OFFSETS)
        ):
            return node.attr
        return None

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr.endswith("_"):
            target = self._offsets_attr(func.value)
            whole = not isinstance(func.value, ast.Subscript)
            zeroing = whole and (
                func.attr == "zero_"
                or (
                    func.attr == "fill_"
                    and len(node.args) == 1
                    and isinstance(node.args[0], ast.Constant)
                    and node.args[0].value == 0
                )
            )
            if target == DEVICE_OFFSETS:
                self.device_mutated.append(node.lineno)
                if zeroing:
                    self.device_zeroed.append(node.lineno)
            elif target == HOST_OFFSETS:
                self.host_mutated.append(node.lineno)
                if zeroing:
                    self.host_zeroed.append(node.lineno)
        self.generic_visit(node)

    def _assigned(self, target: ast.AST, lineno: int) -> None:
        if isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._assigned(element, lineno)
            return
        attr = self._offsets_attr(target)
        if attr == HOST_OFFSETS:
            self.host_mutated.append(lineno)
        elif attr == DEVICE_OFFSETS:
            # Rebinding or a slice write: not the whole tensor zeroed in place.
            self.device_rebound = True

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._assigned(target, node.lineno)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._assigned(node.target, node.lineno)
        self.generic_visit(node)
