"""StaticSink: the static-sink builder leaves the shared ``seq_lens`` alone.

The bug and the fix are :data:`RECORD`'s ``why`` and ``how``. The fix is
more than one removed statement, so its proof is of a second kind: the
whole factory as installed must be, by its normalised AST, the upstream
factory of a known release (:data:`KNOWN_BUGGY`); a vendor's change anywhere
in it is left alone, with a warning naming the file and the line.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from vllm_overlay.code import (
    Code,
    Shape,
    binds,
    method_def,
    module_scope,
    parse_source,
    top_level_bindings,
    tree_reader,
)
from vllm_overlay.fixes.base import Fix, deferred
from vllm_overlay.record import PatchTarget
from vllm_overlay.state import InstallState

STATIC_SINK = Path("vllm/model_executor/layers/attention/static_sink_attention.py")
FACTORY = "create_static_sink_attention_backend"
BUILDER = "StaticSinkAttentionBuilder"
METHOD = "build"
METADATA_PARAMETER = "common_attn_metadata"

KNOWN_BUGGY = {
    "b7134bf2b5acdd3870914c9f2a8457cc2ea20286048f7186a2b1e3ef78411621": (
        "0.14.0-0.34.0"
    ),
}
"""Every upstream factory whose builder writes the shared metadata, by the
digest of its normalised AST (:func:`factory_digest`), with the releases
that ship it (``tests/unit/test_static_sink_releases.py`` reads each
release's sdist)."""
KNOWN_FIXED = {
    "356c31fa782e5dc53764879a911f2b2e87ae2bf61ab6cb5f9b119ee0a68de2f0": (
        "patch 0004 (the series' fix, not upstream yet)"
    ),
    "f7da341800ccdbd77847cdb0020db43faf92b1efbbff6a6b57124218ca82c235": (
        "patches 0004 and 0006 (the fix, and its opt-out of the V1 runner's "
        "update_block_table shortcut)"
    ),
}
"""Every factory known to leave the shared metadata alone and to refresh
the sink lengths in ``update_draft_decode_metadata``: patch 0004 applied to
each release of :data:`KNOWN_BUGGY`, and 0006 after it on the releases with
the V1 model runner. The first 0004, whose builder only kept its own copy
of the lengths, is not here: Model Runner V2's in-place draft steps leave it
stale, so it is unrecognised."""


@dataclass(frozen=True)
class SinkCode(Code):
    """What ``create_static_sink_attention_backend`` is, by its AST (UNKNOWN:
    no known factory, a vendor's change or the first 0004; MISSING: before
    0.14.0)."""

    factory: ast.FunctionDef | None = field(default=None, compare=False, repr=False)
    """For BUGGY and FIXED: the definition read (BUGGY: proven against the
    loaded one; FIXED: read by the series' rules, with no second parse)."""
    imports: tuple[ast.stmt, ...] = field(default=(), compare=False, repr=False)
    """For BUGGY: the module-level imports the factory was compiled with."""


def factory_digest(factory: ast.FunctionDef) -> str:
    """The whole factory's unparsed AST (comments, layout and quoting gone),
    hashed: the same on every Python the overlay runs on."""
    return hashlib.sha256(ast.unparse(factory).encode()).hexdigest()


def inspect_static_sink_source(source: str | bytes, file: Path) -> SinkCode:
    """Classify ``create_static_sink_attention_backend`` in ``source``.

    The whole factory is judged, not only ``build``: what a vendor changes
    anywhere in it (the class handed to ``subclass_attention_backend``, a
    decorator, another method) decides what the runner calls.
    """
    module = parse_source(source, file)
    if not isinstance(module, ast.Module):
        return SinkCode(Shape.UNPARSEABLE, file, module.line, module.detail)
    bound = top_level_bindings(module, FACTORY)
    if not bound:
        return SinkCode(Shape.MISSING, file, None, f"no {FACTORY}")
    factory = bound[-1]
    if len(bound) > 1 or not isinstance(factory, ast.FunctionDef):
        why = f"{FACTORY} is not one function definition"
        return SinkCode(Shape.UNKNOWN, file, factory.lineno, why)
    digest = factory_digest(factory)
    if digest in KNOWN_BUGGY:
        why = (
            f"{FACTORY} is upstream's factory of vLLM {KNOWN_BUGGY[digest]}: its "
            f"{BUILDER}.{METHOD} adds the sink to the shared seq_lens in place"
        )
        imports = tuple(
            s
            for s in module_scope(module)
            if isinstance(s, ast.Import | ast.ImportFrom)
        )
        line = _build_line(factory)
        return SinkCode(Shape.BUGGY, file, line, why, factory, imports)
    if digest in KNOWN_FIXED:
        why = f"{FACTORY} leaves the shared metadata alone ({KNOWN_FIXED[digest]})"
        return SinkCode(Shape.FIXED, file, _build_line(factory), why, factory)
    why = (
        f"{FACTORY} is no known upstream factory (normalised AST {digest[:12]}; "
        f"known: vLLM {', '.join(sorted(KNOWN_BUGGY.values()))}; patch 0004)"
    )
    return SinkCode(Shape.UNKNOWN, file, factory.lineno, why)


inspect_static_sink_tree = tree_reader(
    STATIC_SINK, inspect_static_sink_source, SinkCode
)
"""The verdict in the vLLM source tree (or install root) at a path (the
factory it holds is only read: an install plans from
:func:`inspect_static_sink_source`'s own)."""


def _build_line(factory: ast.FunctionDef) -> int:
    """The line of ``build`` in a known factory (each has exactly one)."""
    builder = next(n for n in factory.body if binds(n, BUILDER))
    assert isinstance(builder, ast.ClassDef)
    method = method_def(builder, METHOD)
    assert method is not None
    return method.lineno


RECORD = PatchTarget(
    name="static-sink-keeps-shared-seq-lens",
    module="vllm.model_executor.layers.attention.static_sink_attention",
    qualname=f"{BUILDER}.{METHOD}",
    source_file=str(STATIC_SINK),
    why=(
        "StaticSinkAttentionBuilder.build adds the sink to "
        "common_attn_metadata.seq_lens in place and reassigns max_seq_len and "
        "block_table_tensor on the metadata it is handed. The model runner "
        "hands every KV-cache group and the drafter a shallow copy of one "
        "metadata, so seq_lens is shared: the builders after a static-sink "
        "group read lengths too long by the sink, a second static-sink group "
        "adds it twice, and the V1 proposer, which rebuilds on one metadata "
        "at every draft step, adds it once more per step. Model Runner V2's "
        "fused drafting builds once, then advances the runner's seq_lens in "
        "place and calls update_draft_decode_metadata between draft steps, so "
        "a builder that keeps its own lengths must refresh them there. "
        "Upstream has not fixed it (patch 0004 of the series)."
    ),
    how=(
        f"At start-up the plugin reads {STATIC_SINK.name} by its AST (no "
        f"import): the whole {FACTORY} (decorators, every statement, the "
        "nested builder class and the class it hands subclass_attention_backend)"
        " must be, by its normalised AST, the upstream factory of a known "
        "release. When vLLM imports the module, after proving the loaded "
        "factory is the code that was read (equal code objects), it is wrapped "
        "so that each builder it makes gets patch 0004's behaviour: the "
        "vendor's build runs on a shallow copy of the metadata whose seq_lens "
        "is a buffer of the builder's own, and the runner's seq_lens and block "
        "table it read are remembered; an added update_draft_decode_metadata "
        "(where the underlying builder has one) recomputes the lengths with "
        "the sink into the same buffer and re-copies the runner's block table "
        "behind the sink blocks, by capture-safe ops, then runs the inherited "
        "one; supports_update_block_table is set to False. The shared object "
        "and its tensors keep what the runner put there. Code it cannot prove "
        "(a vendor's factory, the first 0004) is left alone, with a warning "
        "naming the file, the line and why."
    ),
    related=(
        (
            "vllm-overlay patch 0004: [Bugfix] Keep the shared seq_lens in "
            "StaticSinkAttentionBuilder.build (not sent upstream yet; the PR "
            "is ready in docs/upstream/static-sink-seq-lens.md)"
        ),
    ),
    affected="0.14.0..",
    inert_from="none yet",
    removal=(
        "Inert on a vLLM whose builder leaves the shared metadata alone (the "
        "overlay sees patch 0004's factory and does nothing). Remove this "
        "target once upstream carries the fix and the oldest vLLM release "
        "the overlay supports has it."
    ),
    reaches=(
        f"{FACTORY}() and every backend it makes (StaticSinkAttention layers)",
        "subclasses of a StaticSinkAttentionBuilder calling super().build",
        "Model Runner V2's update_draft_decode_metadata between draft steps",
    ),
)
NAME = RECORD.name


def assess_file(file: Path, version: str) -> InstallState:
    """The decision for one ``static_sink_attention.py``."""
    code = inspect_static_sink_source(file.read_bytes(), file)
    return FIX.decided(version, code, lambda: deferred(FIX.install, "SinkPlan")(code))


FIX = Fix(
    order=30,
    record=RECORD,
    pr="StaticSink",
    install=f"{__name__}.install",
    decide=assess_file,
    read_tree=inspect_static_sink_tree,
    what=" for StaticSink's shared seq_lens",
    rules=f"{__name__}.series",
    review=f"{__name__}.review",
)
