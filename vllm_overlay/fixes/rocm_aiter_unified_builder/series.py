"""#53821's patch read on a source tree: 0003, AITER unified's own builder.

Carried where ``ROCM_AITER_UNIFIED_ATTN`` is handed the generic ROCm builder
on a runner that replays FULL graphs on capture-built metadata (its dummy
run builds with ``for_cudagraph_capture`` when the runtime mode is FULL:
0.27.0 on). Earlier releases share the builder too, but no replay reads the
zeroed offsets there (the overlay still covers 0.11.1-0.11.2, where every
dummy run builds for capture; the patch does not fit them). In place once
the backend hands out a builder of its own whose capture keeps both
offsets and fills ``seq_lens`` with 1, and ROCM_ATTN's is 0001's.
"""

from __future__ import annotations

import ast
from pathlib import Path

from vllm_overlay.code import V1_RUNNER, Code, Shape, method_def, parse_module, reads
from vllm_overlay.fixes.rocm_aiter_unified_builder.code import (
    AITER_UNIFIED_ATTN,
    BACKEND_CLASS,
    inspect_aiter_tree,
)
from vllm_overlay.fixes.rocm_capture_host_offsets.code import (
    BUILDER_CLASS,
    CAPTURE_METHOD,
    ROCM_ATTN,
    inspect_capture_tree,
)
from vllm_overlay.patch_rules import Cache, PatchRule, fix_patch

RUNNER = V1_RUNNER
RUNNER_CLASS = "GPUModelRunner"
DUMMY_RUN = "_dummy_run"
BUILD_METADATA = "_build_attention_metadata"


@reads(ROCM_ATTN, AITER_UNIFIED_ATTN, V1_RUNNER)
def shared_on_full_replay(tree: Path, cache: Cache) -> Code:
    """0003's reading: the generic builder handed out, and the runner's
    FULL-graph replays built for capture."""
    rocm = inspect_capture_tree(tree)
    if rocm.shape is Shape.MISSING:
        return Code(
            Shape.MISSING,
            rocm.file,
            None,
            f"{ROCM_ATTN}: {rocm.detail}, the generic builder whose capture the "
            "patch keeps from AITER unified",
        )
    aiter = inspect_aiter_tree(tree)
    if aiter.shape is not Shape.BUGGY:
        return aiter
    return _runner_replays_full(tree, aiter, cache)


_FLAG: dict[str, type] = {"text": str, "line": int, "full": bool, "true": bool}
"""One ``for_cudagraph_capture=`` argument of the dummy run's metadata build:
its source, its line, whether it names ``FULL``, whether it is ``True``."""


def capture_flags(source: bytes) -> list[dict[str, object]]:
    """Every ``for_cudagraph_capture=`` argument of the
    :data:`BUILD_METADATA` calls in ``GPUModelRunner._dummy_run``."""
    module = parse_module(source, RUNNER)
    methods = [
        method_def(node, DUMMY_RUN)
        for node in ast.walk(module)
        if isinstance(node, ast.ClassDef) and node.name == RUNNER_CLASS
    ]
    return [
        {
            "text": ast.unparse(flag),
            "line": flag.lineno,
            "full": any(
                isinstance(n, ast.Attribute) and n.attr == "FULL"
                for n in ast.walk(flag)
            ),
            "true": isinstance(flag, ast.Constant) and flag.value is True,
        }
        for method in methods
        if method is not None
        for call in ast.walk(method)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == BUILD_METADATA
        for keyword in call.keywords
        if keyword.arg == "for_cudagraph_capture"
        for flag in (keyword.value,)
    ]


def _runner_replays_full(tree: Path, shared: Code, cache: Cache) -> Code:
    """The runner's half of the reading, kept by ``cache`` under the file's
    content: the runner is the largest file any rule parses, and it changes
    only between releases."""
    file = tree / RUNNER
    where = f"{RUNNER}: {RUNNER_CLASS}.{DUMMY_RUN}"
    reader = (Path(__file__), Path(method_def.__code__.co_filename))
    try:
        data = file.read_bytes()
        flags = cache("carry.runner-capture-flags", data, reader, _FLAG, capture_flags)
    except (OSError, SyntaxError, ValueError) as exc:
        return Code(Shape.UNPARSEABLE, file, None, f"cannot read {RUNNER}: {exc}")
    if len(flags) != 1:
        return Code(
            Shape.UNKNOWN,
            file,
            None,
            f"{where}: {len(flags)} calls of {BUILD_METADATA} with "
            "for_cudagraph_capture, not one",
        )
    flag = flags[0]
    text, line = flag["text"], flag["line"]
    assert isinstance(line, int)
    if flag["full"]:
        return Code(
            Shape.BUGGY,
            shared.file,
            shared.line,
            f"{shared.detail}, and {where} builds FULL-graph replays with "
            f"for_cudagraph_capture={text} (line {line})",
        )
    if flag["true"]:
        return Code(
            Shape.NOT_FOR,
            file,
            line,
            f"(0.11.1-0.11.2) {where} builds every dummy run for capture (line "
            f"{line}), code the patch does not apply to as it is; the overlay "
            "covers it",
        )
    return Code(
        Shape.NOT_FOR,
        file,
        line,
        f"(0.12.0-0.26.0) {where} builds for capture only when capturing "
        f"(for_cudagraph_capture={text}, line {line}), so no replay reads the "
        "zeroed offsets",
    )


@reads(AITER_UNIFIED_ATTN, ROCM_ATTN)
def own_builder_keeps_offsets(tree: Path, cache: Cache) -> Code:
    """0003: AITER unified's capture keeps both offsets; ROCM_ATTN's is 0001's.

    ``get_builder_cls`` must hand out a builder of the module's own whose
    capture provably writes neither offsets tensor (FIXED, by
    :mod:`.code`) and fills ``seq_lens`` with 1, and the ROCm builder must
    still have 0001's shape. Upstream's builder (0.29.0+) has this shape,
    whatever its name, so the patch is then reported as upstreamed.
    """
    aiter = inspect_aiter_tree(tree)
    file = aiter.file
    if aiter.shape is Shape.BUGGY:
        why = f"{BACKEND_CLASS} hands out {BUILDER_CLASS}, whose capture zeroes"
        return Code(Shape.BUGGY, file, aiter.line, f"{why} the device offsets")
    capture = aiter.method
    if aiter.shape is not Shape.FIXED or capture is None:
        return aiter
    if not any(_fills_seq_lens_with_one(n) for n in ast.walk(capture)):
        why = f"{CAPTURE_METHOD} does not fill seq_lens with 1"
        return Code(Shape.UNKNOWN, file, capture.lineno, why)
    rocm = inspect_capture_tree(tree)
    if rocm.shape is not Shape.FIXED:
        return Code(rocm.shape, rocm.file, rocm.line, f"ROCM_ATTN: {rocm.detail}")
    return Code(
        Shape.FIXED,
        file,
        capture.lineno,
        f"{aiter.builder}.{CAPTURE_METHOD} keeps both query offsets; ROCM_ATTN "
        "zeroes the device offsets only",
    )


def _fills_seq_lens_with_one(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "fill_"
        and isinstance(node.func.value, ast.Attribute)
        and node.func.value.attr == "seq_lens"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == 1
    )


RULES: tuple[PatchRule, ...] = (
    fix_patch(
        "rocm-aiter-unified-capture-keeps-offsets",
        shared_on_full_replay,
        own_builder_keeps_offsets,
    ),
)
