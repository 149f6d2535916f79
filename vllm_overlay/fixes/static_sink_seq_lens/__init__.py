"""StaticSink: the static-sink builder leaves the shared ``seq_lens`` alone.

``StaticSinkAttentionBuilder.build`` (made by
``create_static_sink_attention_backend``, vLLM 0.14.0 to 0.33.0) adds the
sink to ``common_attn_metadata.seq_lens`` in place and reassigns
``max_seq_len`` and ``block_table_tensor`` on the object it was handed. The
model runner hands every KV-cache group and the drafter a shallow copy of
one metadata, so the tensor is shared: builders after it read lengths too
long by the sink, a second static-sink group adds the sink twice, and a
drafter that rebuilds on one metadata adds it at every step.

The fix is patch 0004's, and more than one removed statement, so its proof
is of a second kind: the whole factory as installed must be, by its
normalised AST, the upstream factory of a known release
(:data:`KNOWN_BUGGY`, every variant listed with its releases). A vendor's
change anywhere in it (an empty subclass handed to
``subclass_attention_backend``, a decorator, another method) is no known
factory and is left alone, with a warning naming the file and the line.
When vLLM imports the module, and after proving the loaded factory is the
code that was read (equal code objects), each builder it makes gets 0004's
behaviour: the vendor's ``build`` runs on a shallow copy of the metadata
whose ``seq_lens`` is a buffer of the builder's own (stable across steps,
as a captured graph needs), the runner's tensors it read are remembered,
``update_draft_decode_metadata`` (Model Runner V2's in-place draft steps)
refreshes the buffer and the block table from them before the inherited
one runs, and the runner's ``update_block_table`` shortcut is turned off.
"""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_overlay.arming import arm_on_import, logger
from vllm_overlay.code import Code, Shape, binds, parse_source, top_level_bindings
from vllm_overlay.fixes.base import Fix
from vllm_overlay.metadata_writes import method_def
from vllm_overlay.proof import FixRefused, inner_code, prove_compiled_from
from vllm_overlay.record import PatchTarget
from vllm_overlay.state import Action, InstallState, action_for

TYPE_CHECKING = False
if TYPE_CHECKING:
    from vllm_overlay.fixes.base import Before

STATIC_SINK = Path("vllm/model_executor/layers/attention/static_sink_attention.py")
FACTORY = "create_static_sink_attention_backend"
BUILDER = "StaticSinkAttentionBuilder"
METHOD = "build"
METADATA_PARAMETER = "common_attn_metadata"

KNOWN_BUGGY = {
    "b7134bf2b5acdd3870914c9f2a8457cc2ea20286048f7186a2b1e3ef78411621": (
        "0.14.0-0.33.0"
    ),
}
"""Every upstream factory whose builder writes the shared metadata, by the
digest of its normalised AST (:func:`factory_digest`), with the releases
that ship it (``tests/unit/test_static_sink_releases.py`` reads each
release's sdist)."""
KNOWN_FIXED = {
    "a92f1559f118e162302278de3fd5ecab3019b79d9b2a89e0e260a30ed856de6a": (
        "patch 0004 (the series' fix, not upstream yet)"
    ),
}
"""Every factory known to leave the shared metadata alone and to refresh
the sink lengths in ``update_draft_decode_metadata`` (patch 0004 applied to
each release of :data:`KNOWN_BUGGY`). The first 0004, whose builder only
kept its own copy of the lengths, is not here: Model Runner V2's in-place
draft steps leave it stale, so it is unrecognised."""

FIX_MARKER = "__vllm_overlay_static_sink_fix__"
"""Set on the wrapping factory and on each method the overlay puts on a
builder."""
SEQ_LENS_BUFFER = "_vllm_overlay_seq_lens_with_sink"
"""The builder's own ``seq_lens`` buffer (the attribute the wrapper sets)."""
RUNNER_SEQ_LENS = "_vllm_overlay_runner_seq_lens"
"""The runner's ``seq_lens`` the last build read (the draft update reads
them again: the runner advances them in place)."""
RUNNER_BLOCK_TABLE = "_vllm_overlay_runner_block_table"
"""The runner's block table the last build read."""
DRAFT_UPDATE = "update_draft_decode_metadata"
"""Model Runner V2's in-place refresh between draft steps (not in every
release's base builder)."""
BLOCK_TABLE_SHORTCUT = "supports_update_block_table"
"""The runner's shortcut that reuses another group's metadata with the raw
block table (without the sink blocks): the fixed builder opts out."""


@dataclass(frozen=True)
class SinkCode(Code):
    """What ``create_static_sink_attention_backend`` is, by its AST: BUGGY, a
    known upstream factory whose builder writes the shared metadata; FIXED,
    a known factory whose builder leaves it alone (patch 0004); UNKNOWN, no
    known factory (a vendor's change, or the first 0004): never touched;
    MISSING, no such module (before 0.14.0) or factory."""

    factory: ast.FunctionDef | None = field(default=None, compare=False, repr=False)
    """For BUGGY: the factory's definition that was read (its code is proven
    against the loaded one before the install)."""
    imports: tuple[ast.stmt, ...] = field(default=(), compare=False, repr=False)
    """For BUGGY: the module-level imports the factory was compiled with."""


def factory_digest(factory: ast.FunctionDef) -> str:
    """The normalised AST of the whole factory (its decorators, every
    statement, the nested builder class with its decorators and methods, the
    ``subclass_attention_backend`` call): its unparsed text (comments,
    layout and quoting gone), hashed. The same on every Python the overlay
    runs on."""
    return hashlib.sha256(ast.unparse(factory).encode()).hexdigest()


def inspect_static_sink_tree(root: Path) -> SinkCode:
    """The verdict for the vLLM source tree (or install root) at ``root``."""
    file = root / STATIC_SINK
    if not file.is_file():
        return SinkCode(Shape.MISSING, file, None, f"no {STATIC_SINK}")
    return inspect_static_sink_source(file.read_bytes(), file)


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
        imports = tuple(module_imports(module))
        line = _build_line(factory)
        return SinkCode(Shape.BUGGY, file, line, why, factory, imports)
    if digest in KNOWN_FIXED:
        why = f"{FACTORY} leaves the shared metadata alone ({KNOWN_FIXED[digest]})"
        return SinkCode(Shape.FIXED, file, _build_line(factory), why)
    why = (
        f"{FACTORY} is no known upstream factory (normalised AST {digest[:12]}; "
        f"known: vLLM {', '.join(sorted(KNOWN_BUGGY.values()))}; patch 0004)"
    )
    return SinkCode(Shape.UNKNOWN, file, factory.lineno, why)


def _build_line(factory: ast.FunctionDef) -> int:
    """The line of ``build`` in a known factory (each has exactly one)."""
    builder = next(n for n in factory.body if binds(n, BUILDER))
    assert isinstance(builder, ast.ClassDef)
    method = method_def(builder, METHOD)
    assert method is not None
    return method.lineno


def module_imports(module: ast.Module) -> list[ast.stmt]:
    """The import statements of the module's own scope (in if/try too)."""
    found: list[ast.stmt] = []

    def visit(statements: list[ast.stmt]) -> None:
        for statement in statements:
            if isinstance(statement, ast.Import | ast.ImportFrom):
                found.append(statement)
            elif not isinstance(statement, ast.FunctionDef | ast.ClassDef):
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(statement, block, []))
                for handler in getattr(statement, "handlers", []):
                    visit(handler.body)

    visit(module.body)
    return found


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
    affected="0.14.0-0.33.0",
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
WHAT = " for StaticSink's shared seq_lens"
"""Names this fix in shared log messages."""


@dataclass(frozen=True)
class SinkPlan:
    """What the install will do, decided from the AST at registration."""

    code: SinkCode

    @property
    def summary(self) -> str:
        return (
            f"{self.code.file}:{self.code.line} {BUILDER}.{METHOD} runs as "
            "installed on a shallow copy of the metadata whose seq_lens is the "
            f"builder's own buffer, {DRAFT_UPDATE} refreshes that buffer and the "
            "block table from the runner's tensors, and the update_block_table "
            "shortcut is off; the shared metadata is not written"
        )


def assess(before: Before | None = None) -> InstallState:
    """What the overlay would do on the installed vLLM, changing nothing."""
    return FIX.assess_installed(assess_file)


def assess_tree(root: Path, version: str, before: Before | None = None) -> InstallState:
    """The decision for the vLLM source tree (or install) at ``root``."""
    return FIX.assess_in(root, version, assess_file)


def assess_file(file: Path, version: str) -> InstallState:
    """The decision for one ``static_sink_attention.py``."""
    code = inspect_static_sink_source(file.read_bytes(), file)
    if code.shape is Shape.BUGGY:
        plan = SinkPlan(code)
        return FIX.state(
            Action.INSTALLED,
            version,
            plan.summary,
            code,
            covered=RECORD.reaches,
            plan=plan,
        )
    action = action_for(code.shape)
    if action is not Action.UNRECOGNISED:
        return FIX.state(action, version, code.detail, code)
    where = f"{code.file}:{code.line}" if code.line else str(code.file)
    return FIX.left_alone(
        version, code, f"unrecognised {code.shape} code: {where}: {code.detail}"
    )


def arm(state: InstallState) -> None:
    """Install the fix as soon as vLLM imports the static-sink module."""
    assert isinstance(state.plan, SinkPlan)
    plan = state.plan
    arm_on_import(
        state, RECORD.module, lambda module: _install(module, plan, state), WHAT
    )


def _install(module: types.ModuleType, plan: SinkPlan, state: InstallState) -> None:
    factory = getattr(module, FACTORY, None)
    if getattr(factory, FIX_MARKER, False):
        state.applied_to_class = True
        return
    wrapper = fixed_factory(factory, plan)
    setattr(module, FACTORY, wrapper)
    state.applied_to_class = getattr(module, FACTORY) is wrapper
    # vLLM imports the module on every platform at start-up; the fix is
    # worth more than a debug line only once a model makes a static-sink
    # backend (see _fix_builder).
    logger.debug(
        "vllm-overlay: armed the StaticSink seq_lens fix on vLLM %s: %s",
        state.vllm_version,
        plan.summary,
    )


def fixed_factory(factory: Any, plan: SinkPlan) -> Any:
    """A factory that fixes each builder the proven ``factory`` makes.

    Raises :class:`FixRefused` unless ``factory`` (through its cache, if
    any) was compiled from the definition that was read: then the builder
    class it makes holds exactly the method the AST check accepted.
    """
    code = plan.code
    assert code.factory is not None
    where = f"{code.file}:{code.factory.lineno} {FACTORY}"
    original = getattr(factory, "__wrapped__", factory)
    if not isinstance(original, types.FunctionType):
        raise FixRefused(
            f"{where}: the module holds {type(original).__name__}, not the "
            "function in the file (replaced or wrapped by someone else)"
        )
    prove_compiled_from(original, code.factory, code.file, None, where, code.imports)
    body = inner_code(original.__code__, BUILDER)
    build_code = inner_code(body, METHOD) if body is not None else None
    if build_code is None:
        raise FixRefused(f"{where}: no {BUILDER}.{METHOD} in the loaded code")

    @functools.wraps(factory)
    def create(*args: Any, **kwargs: Any) -> Any:
        backend = factory(*args, **kwargs)
        _fix_builder(backend.get_builder_cls(), build_code)
        return backend

    setattr(create, FIX_MARKER, True)
    return create


def _fix_builder(builder: type, build_code: types.CodeType) -> None:
    """Give ``builder`` patch 0004's behaviour when its ``build`` is the
    proven method (once): ``build`` on a copy with a buffer of its own, a
    refreshing ``update_draft_decode_metadata`` where the underlying builder
    has one, and no ``update_block_table`` shortcut."""
    live = builder.__dict__.get(METHOD)
    if getattr(live, FIX_MARKER, False):
        return
    if not isinstance(live, types.FunctionType) or live.__code__ is not build_code:
        logger.warning(
            "vllm-overlay: fix%s not applied to %s: its %s is not the method "
            "that was proven",
            WHAT,
            builder.__name__,
            METHOD,
        )
        return
    inherited = getattr(builder, DRAFT_UPDATE, None)
    if DRAFT_UPDATE in builder.__dict__ or (
        inherited is not None and not isinstance(inherited, types.FunctionType)
    ):
        logger.warning(
            "vllm-overlay: fix%s not applied to %s: its %s is not a plain "
            "inherited method",
            WHAT,
            builder.__name__,
            DRAFT_UPDATE,
        )
        return
    setattr(builder, METHOD, keeping_shared_metadata(live))
    if inherited is not None:
        setattr(builder, DRAFT_UPDATE, refreshing_draft_update(inherited))
    setattr(builder, BLOCK_TABLE_SHORTCUT, False)
    logger.info(
        "vllm-overlay: installed the StaticSink seq_lens fix on %s: its %s runs "
        "on a copy of the metadata with a seq_lens buffer of its own, %s, and "
        "the update_block_table shortcut is off",
        builder.__name__,
        METHOD,
        (
            f"{DRAFT_UPDATE} refreshes it from the runner's seq_lens"
            if inherited is not None
            else f"no {DRAFT_UPDATE} to refresh it (this vLLM has none)"
        ),
    )


def keeping_shared_metadata(build: types.FunctionType) -> types.FunctionType:
    """``build``, run on a copy of the metadata with a ``seq_lens`` of its own.

    The copy is shallow, as the runner's per-group copies are; only
    ``seq_lens`` (the one tensor the method writes in place) is moved into
    the builder's buffer, sized once for the scheduler's batch so that a
    captured graph reads the same memory on every replay. ``max_seq_len``
    and ``block_table_tensor`` are reassigned on the copy only. The runner's
    ``seq_lens`` and block table are remembered for
    :func:`refreshing_draft_update`.
    """

    @functools.wraps(build)
    def fixed(self: Any, *args: Any, **kwargs: Any) -> Any:
        # The proven method's parameters: common_prefix_len,
        # common_attn_metadata, fast_build (vLLM passes them either way).
        if METADATA_PARAMETER in kwargs:
            common_attn_metadata = kwargs[METADATA_PARAMETER]
        else:
            common_attn_metadata = args[1]
        shared = common_attn_metadata.seq_lens
        count = shared.shape[0]
        buffer = self.__dict__.get(SEQ_LENS_BUFFER)
        if (
            buffer is None
            or buffer.shape[0] < count
            or buffer.device != shared.device
            or buffer.dtype != shared.dtype
        ):
            rows = getattr(getattr(self, "block_table_with_sink", None), "shape", ())
            size = max(count, rows[0] if rows else 0)
            buffer = shared.new_zeros(size)
            setattr(self, SEQ_LENS_BUFFER, buffer)
        setattr(self, RUNNER_SEQ_LENS, shared)
        setattr(self, RUNNER_BLOCK_TABLE, common_attn_metadata.block_table_tensor)
        own = copy.copy(common_attn_metadata)
        own.seq_lens = buffer[:count]
        own.seq_lens.copy_(shared)
        if METADATA_PARAMETER in kwargs:
            kwargs[METADATA_PARAMETER] = own
        else:
            args = (args[0], own, *args[2:])
        return build(self, *args, **kwargs)

    setattr(fixed, FIX_MARKER, True)
    return fixed


def refreshing_draft_update(inherited: Any) -> Any:
    """``update_draft_decode_metadata`` that first recomputes what ``build``
    derived from the runner's tensors, then runs ``inherited``.

    Model Runner V2 advances its ``seq_lens`` in place between draft steps
    and calls this instead of ``build``, inside a CUDA graph when it captures
    one: only capture-safe ops (an add into the buffer, a masked fill, a
    slice copy; no allocation of a persistent tensor, no host sync), into
    the same buffers the built metadata points at.
    """

    @functools.wraps(inherited)
    def refresh(self: Any, metadata: Any, *args: Any, **kwargs: Any) -> Any:
        runner_seq_lens = self.__dict__.get(RUNNER_SEQ_LENS)
        runner_block_table = self.__dict__.get(RUNNER_BLOCK_TABLE)
        if runner_seq_lens is not None and runner_block_table is not None:
            torch = _torch()
            count = runner_seq_lens.shape[0]
            seq_lens = self.__dict__[SEQ_LENS_BUFFER][:count]
            torch.add(runner_seq_lens, self.sink_len, out=seq_lens)
            # Padded requests (length 0) stay empty, as build leaves them.
            seq_lens.masked_fill_(runner_seq_lens == 0, 0)
            block_table = runner_block_table[:, : self.max_num_blocks]
            first = self.num_sink_blocks
            self.block_table_with_sink[
                : block_table.shape[0], first : first + block_table.shape[1]
            ] = block_table
        return inherited(self, metadata, *args, **kwargs)

    setattr(refresh, FIX_MARKER, True)
    return refresh


def _torch() -> types.ModuleType:
    """torch, imported only when a draft step runs (never at registration)."""
    import torch

    return torch


def is_installed_on(module: types.ModuleType) -> bool:
    """Whether the loaded module's factory is the overlay's wrapper."""
    return bool(getattr(getattr(module, FACTORY, None), FIX_MARKER, False))


FIX = Fix(
    order=30,
    record=RECORD,
    pr="StaticSink",
    patches=(
        "0004-Bugfix-Keep-the-shared-seq_lens-in-StaticSinkAttenti.patch",
        "0005-Bugfix-Test-that-static-sink-attention-keeps-the-sha.patch",
    ),
    assess=assess,
    assess_tree=assess_tree,
    read_tree=inspect_static_sink_tree,
    arm=arm,
    what=WHAT,
    installed_on=is_installed_on,
    scenarios=(
        "static_sink_then_others",
        "static_sink_twice",
        "static_sink_proposer_rebuilds",
        "static_sink_draft_update",
    ),
    core_scenarios=(
        "static_sink_then_others",
        "static_sink_twice",
        "static_sink_proposer_rebuilds",
    ),
    rules=f"{__name__}.series",
)
