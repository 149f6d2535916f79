"""Opt-in: run the overlay's prefix-prefill kernel instead of vLLM's.

``VLLM_OVERLAY_PREFIX_PREFILL=1`` makes vLLM's ROCm prefill path
(``chunked_prefill_paged_decode``, which the ROCM_ATTN backend calls) use
:func:`vllm_overlay.v1.attention.ops.prefix_prefill.context_attention_fwd`,
whose loads and stores are all masked against the real tensor extents.
Off by default until GPU figures show it at parity with upstream's. As with
the capture fix, the swap happens when vLLM imports the caller, and only if
the function found there is upstream's with the expected parameters.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from types import ModuleType

from vllm_overlay.arming import logger
from vllm_overlay.import_hook import after_import
from vllm_overlay.settings import env_flag
from vllm_overlay.state import InstallState

KERNEL_ENV = "VLLM_OVERLAY_PREFIX_PREFILL"
CALLER_MODULE = "vllm.v1.attention.ops.chunked_prefill_paged_decode"
LEGACY_CALLER_MODULE = "vllm.attention.ops.chunked_prefill_paged_decode"
"""Where 0.11.x-0.13.x keep the caller (and the kernel, beside it)."""
CALLER_MODULES = (CALLER_MODULE, LEGACY_CALLER_MODULE)


def caller_module() -> str:
    """The caller's module name in the running vLLM's layout (found by its
    file beside the ``vllm`` package, without importing it)."""
    vllm = sys.modules.get("vllm")
    root = Path(getattr(vllm, "__file__", "") or ".").parent
    for name in CALLER_MODULES:
        relative = Path(*name.split(".")[1:]).with_suffix(".py")
        if (root / relative).is_file():
            return name
    return CALLER_MODULE


def upstream_kernel_module(caller: str) -> str:
    """vLLM's prefix-prefill module: the caller imports it from beside itself."""
    return f"{caller.rpartition('.')[0]}.prefix_prefill"


def kernel_opt_in(state: InstallState) -> None:
    """``VLLM_OVERLAY_PREFIX_PREFILL=1``: swap in the overlay's kernel too."""
    if not env_flag(KERNEL_ENV):
        return

    def swap(module: ModuleType) -> None:
        try:
            problem = _swap(module, state)
        except Exception as exc:  # never fail vLLM's own import
            state.problems.append(f"kernel swap failed: {exc!r}")
            logger.warning("vllm-overlay: prefix-prefill kernel not swapped: %r", exc)
            return
        if problem is not None:
            state.problems.append(problem)
            logger.warning("vllm-overlay: %s", problem)

    after_import(caller_module(), swap)


def _swap(module: ModuleType, state: InstallState) -> str | None:
    """Swap the caller's kernel for the overlay's; why not, if it is not
    upstream's with the expected parameters."""
    from vllm_overlay.v1.attention.ops import prefix_prefill

    ours = prefix_prefill.context_attention_fwd
    current = getattr(module, "context_attention_fwd", None)
    if current is ours:
        state.kernel = "overlay"
        return None
    if getattr(current, "__module__", None) != upstream_kernel_module(module.__name__):
        return (
            f"{module.__name__}.context_attention_fwd is not vLLM's prefix-prefill "
            "kernel; kernel not swapped"
        )
    theirs = list(inspect.signature(current).parameters)
    mine = list(inspect.signature(ours).parameters)
    if theirs != mine:
        return f"vLLM's context_attention_fwd takes {theirs}, not {mine}; not swapped"
    module.context_attention_fwd = ours
    state.kernel = "overlay"
    logger.info(
        "vllm-overlay: using the overlay's prefix-prefill kernel (%s)", KERNEL_ENV
    )
    return None
