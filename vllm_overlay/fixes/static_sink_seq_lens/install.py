"""StaticSink's install: patch 0004's behaviour on each builder the proven
factory makes (imported only once the decision is INSTALLED)."""

from __future__ import annotations

import copy
import functools
import types
from dataclasses import dataclass
from typing import Any

from vllm_overlay.arming import logger
from vllm_overlay.fixes.static_sink_seq_lens import (
    BUILDER,
    FACTORY,
    FIX,
    METADATA_PARAMETER,
    METHOD,
    SinkCode,
)
from vllm_overlay.proof import FixRefused, inner_code, prove_compiled_from
from vllm_overlay.state import InstallState

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


def install(module: types.ModuleType, state: InstallState) -> None:
    """Wrap the static-sink module's factory (:func:`fixed_factory`)."""
    plan = state.plan
    assert isinstance(plan, SinkPlan)
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
    inherited = getattr(builder, DRAFT_UPDATE, None)
    if not isinstance(live, types.FunctionType) or live.__code__ is not build_code:
        problem = f"its {METHOD} is not the method that was proven"
    elif DRAFT_UPDATE in builder.__dict__ or (
        inherited is not None and not isinstance(inherited, types.FunctionType)
    ):
        problem = f"its {DRAFT_UPDATE} is not a plain inherited method"
    else:
        problem = ""
    if problem:
        logger.warning(
            "vllm-overlay: fix%s not applied to %s: %s",
            FIX.what,
            builder.__name__,
            problem,
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
            import torch  # only when a draft step runs, never at registration

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


def is_installed_on(module: types.ModuleType) -> bool:
    """Whether the loaded module's factory is the overlay's wrapper."""
    return bool(getattr(getattr(module, FACTORY, None), FIX_MARKER, False))
