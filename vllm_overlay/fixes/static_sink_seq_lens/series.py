"""StaticSink's patches read on a source tree: 0004 (the fix), 0005 (its
test) and 0006 (the V1 runner's opt-out).

0004 is carried where the factory is a known upstream one whose builder
writes the shared metadata, and holds once it is patch 0004's (no release
fixes it yet); 0005 is carried wherever there is a static-sink builder, and
holds once a vLLM test makes a static-sink backend, builds, and then
asserts on ``seq_lens``. 0006 is carried where a V1 model runner reads a
builder's ``supports_update_block_table`` (through 0.33.0) and the
static-sink builder does not opt out; Model Runner V2 takes that shortcut
for Mamba groups only, so 0.34.0 has nothing for it to change.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from vllm_overlay.code import V1_RUNNER, Code, Shape, binds, parse_module, reads
from vllm_overlay.fixes.static_sink_seq_lens import (
    BUILDER,
    FACTORY,
    STATIC_SINK,
    inspect_static_sink_tree,
)
from vllm_overlay.patch_rules import Cache, PatchRule, fix_patch, test_patch
from vllm_overlay.vllm_tests import (
    ATTENTION_TESTS,
    asserts_on,
    calls,
    find_test,
    test_functions,
)


@reads(STATIC_SINK, V1_RUNNER)
def factory(tree: Path, cache: Cache) -> Code:
    """0004's reading: the factory's shape."""
    return inspect_static_sink_tree(tree)


def regression_test_present(tree: Path, cache: Cache) -> Code:
    """0005: a vLLM test makes a static-sink backend, builds metadata with
    it, and then asserts on ``seq_lens``.

    Judged by what a test function does, in the order of its lines (any
    module under tests/v1/attention, so an upstream version counts): a call
    of the factory (or of a module-level helper that calls it), a later
    ``.build(...)``, then an ``assert`` (or ``assert*`` call) reading a
    ``seq_lens``.
    """
    return find_test(
        tree,
        _sink_test_line,
        f"no test in {ATTENTION_TESTS} builds with {FACTORY}'s builder and then "
        "asserts on seq_lens",
    )


def _sink_test_line(source: str) -> int | None:
    """The line of a test that makes a static-sink backend, builds, then
    asserts on seq_lens."""
    if FACTORY not in source:
        return None
    try:
        module = ast.parse(source)
    except SyntaxError:
        return None
    # A module-level helper that calls the factory makes the backend for
    # the test that calls it (vLLM's tests often build through helpers).
    makers = {FACTORY} | {
        node.name
        for node in module.body
        if isinstance(node, ast.FunctionDef)
        and any(calls(c, FACTORY) for c in ast.walk(node))
    }
    for test in test_functions(module):
        nodes = list(ast.walk(test))
        made = [c.lineno for c in nodes if any(calls(c, m) for m in makers)]
        if not made:
            continue
        built = [c.lineno for c in nodes if calls(c, "build") and c.lineno > min(made)]
        if built and any(
            asserts_on(n, "seq_lens") and n.lineno > min(built) for n in nodes
        ):
            return test.lineno
    return None


SHORTCUT = "supports_update_block_table"
_READ = {"line": int}


def shortcut_reads(source: bytes) -> list[dict[str, object]]:
    """Every read of a ``supports_update_block_table`` attribute in the V1
    runner (where it reuses a group's metadata for the next group of the
    same spec and builder type), by line."""
    return [{"line": line} for line in _shortcut_lines(source)]


@functools.lru_cache(maxsize=4)
def _shortcut_lines(source: bytes) -> tuple[int, ...]:
    """One parse per content: the carry rule and the invariant read the
    same runner."""
    module = parse_module(source, V1_RUNNER)
    return tuple(
        node.lineno
        for node in ast.walk(module)
        if isinstance(node, ast.Attribute)
        and node.attr == SHORTCUT
        and isinstance(node.ctx, ast.Load)
    )


def builder_opts_out(factory: ast.FunctionDef) -> bool:
    """Whether the factory's builder class sets the shortcut to False."""
    for builder in factory.body:
        if not (isinstance(builder, ast.ClassDef) and binds(builder, BUILDER)):
            continue
        for statement in builder.body:
            value = getattr(statement, "value", None)
            if (
                binds(statement, SHORTCUT)
                and isinstance(value, ast.Constant)
                and value.value is False
            ):
                return True
    return False


@reads(STATIC_SINK, V1_RUNNER)
def opt_out(tree: Path, cache: Cache) -> Code:
    """0006's reading: the static-sink factory, then the V1 runner."""
    sink = inspect_static_sink_tree(tree)
    if sink.shape not in (Shape.BUGGY, Shape.FIXED):
        return sink
    file = tree / V1_RUNNER
    reader = (Path(__file__),)
    try:
        data = file.read_bytes() if file.is_file() else b""
        reads = cache(
            "carry.v1-block-table-shortcut", data, reader, _READ, shortcut_reads
        )
    except (OSError, SyntaxError, ValueError) as exc:
        return Code(Shape.UNPARSEABLE, file, None, f"cannot read {V1_RUNNER}: {exc}")
    if not reads:
        return Code(
            Shape.NOT_FOR,
            file,
            None,
            f"no V1 model runner reads {SHORTCUT} ({V1_RUNNER}): Model Runner "
            "V2 takes the update_block_table shortcut for Mamba groups only",
        )
    where = f"{V1_RUNNER} reads {SHORTCUT} (line {reads[0]['line']})"
    if sink.shape is Shape.BUGGY:
        return Code(Shape.BUGGY, sink.file, sink.line, f"{sink.detail}; {where}")
    if sink.factory is not None and builder_opts_out(sink.factory):
        why = f"{sink.detail}; its {BUILDER} opts out of the shortcut {where}"
        return Code(Shape.FIXED, sink.file, sink.line, why)
    return Code(
        Shape.BUGGY,
        sink.file,
        sink.line,
        f"{sink.detail}, but its {BUILDER} keeps the update_block_table "
        f"shortcut that {where}",
    )


RULES: tuple[PatchRule, ...] = (
    fix_patch("static-sink-keeps-shared-seq-lens", factory),
    test_patch("static-sink-regression-test-present", factory, regression_test_present),
    fix_patch("static-sink-opts-out-of-block-table-shortcut", opt_out),
)
