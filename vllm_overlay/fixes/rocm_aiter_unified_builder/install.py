"""The #53821 fix: ROCM_AITER_UNIFIED_ATTN gets a builder that keeps its offsets.

The overlay must not drop the generic capture method's other lines (a vendor
build may carry some, and the #51585 fix lives there), so it derives a
subclass of vLLM's own ``RocmAttentionMetadataBuilder`` whose capture runs
the inherited method, then copies the device offsets' saved values back
(eager ops on metadata built before capture: a few int32 values). The
backend's ``get_builder_cls`` is wrapped, not rewritten, once
:func:`install_on` proves it is the code read; anything else raises
:class:`FixRefused`.
"""

from __future__ import annotations

import functools
import sys
import types
from dataclasses import dataclass
from typing import Any

from vllm_overlay.arming import logger
from vllm_overlay.code import Shape
from vllm_overlay.fixes.rocm_aiter_unified_builder.code import (
    BACKEND_CLASS,
    BUILDER_METHOD,
    GENERIC_MODULE,
    AiterCode,
)
from vllm_overlay.fixes.rocm_capture_host_offsets.code import (
    BUILDER_CLASS,
    CAPTURE_METHOD,
)
from vllm_overlay.proof import FixRefused, prove_compiled_from
from vllm_overlay.state import InstallState

AITER_BUILDER = "RocmAiterUnifiedAttentionMetadataBuilder"
"""The subclass's name: upstream's name for this backend's builder (0.29.0)."""
FIX_MARKER = "__vllm_overlay_aiter_fix__"
"""Set on the wrapping ``get_builder_cls`` and on the subclass."""
BUILDER_ATTR = "__vllm_overlay_builder__"
"""On the wrapper: the subclass it hands out."""


@dataclass(frozen=True)
class AiterPlan:
    """What :func:`install_on` will do, decided from the AST at registration."""

    code: AiterCode

    @property
    def summary(self) -> str:
        return (
            f"{self.code.file}:{self.code.line} {BACKEND_CLASS}.{BUILDER_METHOD}() "
            f"hands out {AITER_BUILDER}, a subclass of {BUILDER_CLASS} whose "
            f"{CAPTURE_METHOD} runs the inherited method as installed (every "
            "line kept) and then puts the device query_start_loc values back; "
            "the host offsets are not touched"
        )


def keeps_offsets_builder(generic: type) -> type:
    """The subclass of ``generic`` for ROCM_AITER_UNIFIED_ATTN."""

    class RocmAiterUnifiedAttentionMetadataBuilder(generic):  # type: ignore[misc, valid-type]
        """vllm-overlay (#53821): the generic capture, then the device
        ``query_start_loc`` values put back; AITER unified attention reads
        that buffer on replay."""

        def build_for_cudagraph_capture(
            self, common_attn_metadata: Any, *args: Any, **kwargs: Any
        ) -> Any:
            offsets = common_attn_metadata.query_start_loc
            saved = offsets.clone()
            try:
                return super().build_for_cudagraph_capture(
                    common_attn_metadata, *args, **kwargs
                )
            finally:
                offsets.copy_(saved)

    builder = RocmAiterUnifiedAttentionMetadataBuilder
    builder.__qualname__ = AITER_BUILDER
    setattr(builder, FIX_MARKER, True)
    return builder


def handing_out(
    original: types.FunctionType, generic: type, builder: type
) -> staticmethod:  # type: ignore[type-arg]
    """``get_builder_cls`` that runs ``original`` and swaps ``generic`` for
    ``builder`` in what it returns (and nothing else)."""

    @functools.wraps(original)
    def get_builder_cls(*args: Any, **kwargs: Any) -> Any:
        handed = original(*args, **kwargs)
        return builder if handed is generic else handed

    setattr(get_builder_cls, FIX_MARKER, True)
    setattr(get_builder_cls, BUILDER_ATTR, builder)
    return staticmethod(get_builder_cls)


def installed_builder(backend: Any) -> type | None:
    """The subclass the backend hands out through the overlay, if it does."""
    raw = getattr(backend, "__dict__", {}).get(BUILDER_METHOD)
    func = getattr(raw, "__func__", None)
    if not getattr(func, FIX_MARKER, False):
        return None
    builder = getattr(func, BUILDER_ATTR, None)
    return builder if backend.get_builder_cls() is builder else None


def install_on(module: types.ModuleType, plan: AiterPlan) -> tuple[type, bool]:
    """Make the loaded AITER module's backend hand out the subclass.

    Returns the subclass and whether this call installed it (False: it was
    already there). Raises :class:`FixRefused` naming file, line and why.
    """
    code = plan.code
    where = f"{code.file}:{code.line} {BACKEND_CLASS}.{BUILDER_METHOD}"
    if code.shape is not Shape.BUGGY or code.method is None:
        raise FixRefused(f"{where}: shape {code.shape}, not the known bug")
    backend = module.__dict__.get(BACKEND_CLASS)
    if not isinstance(backend, type):
        raise FixRefused(f"{where}: the loaded module has no class {BACKEND_CLASS}")
    done = installed_builder(backend)
    if done is not None:
        return done, False
    raw = backend.__dict__.get(BUILDER_METHOD)
    func = getattr(raw, "__func__", None)
    if not isinstance(raw, staticmethod) or not isinstance(func, types.FunctionType):
        raise FixRefused(
            f"{where}: the loaded class holds {type(raw).__name__}, not the plain "
            "static method in the file (replaced or wrapped by someone else)"
        )
    prove_compiled_from(func, code.method, code.file, BACKEND_CLASS, where)
    generic_module = sys.modules.get(GENERIC_MODULE)
    generic = getattr(generic_module, BUILDER_CLASS, None)
    if not isinstance(generic, type):
        raise FixRefused(f"{where}: {GENERIC_MODULE}.{BUILDER_CLASS} is not loaded")
    if module.__dict__.get(BUILDER_CLASS) is not generic or func() is not generic:
        raise FixRefused(
            f"{where}: the module's {BUILDER_CLASS} is not {GENERIC_MODULE}'s "
            "class (rebound since import)"
        )
    builder = keeps_offsets_builder(generic)
    setattr(backend, BUILDER_METHOD, handing_out(func, generic, builder))
    if installed_builder(backend) is not builder:
        setattr(backend, BUILDER_METHOD, raw)
        raise FixRefused(f"{where}: the backend did not take the new method")
    return builder, True


def is_installed_on(module: Any) -> bool:
    """Whether the AITER module's backend hands out the overlay's builder."""
    backend = getattr(module, BACKEND_CLASS, None)
    return backend is not None and installed_builder(backend) is not None


def install(module: types.ModuleType, state: InstallState) -> None:
    """Install the fix on the AITER module vLLM imported (:func:`install_on`)."""
    plan = state.plan
    assert isinstance(plan, AiterPlan)
    builder, new = install_on(module, plan)
    state.applied_to_class = True
    if new:
        logger.info(
            "vllm-overlay: installed the #53821 AITER unified capture fix on "
            "vLLM %s: %s (%s.%s)",
            state.vllm_version,
            plan.summary,
            builder.__module__,
            AITER_BUILDER,
        )
