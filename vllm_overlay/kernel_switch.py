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
from types import ModuleType

from vllm_overlay.import_hook import after_import
from vllm_overlay.install import InstallState, logger

KERNEL_ENV = "VLLM_OVERLAY_PREFIX_PREFILL"
CALLER_MODULE = "vllm.v1.attention.ops.chunked_prefill_paged_decode"
UPSTREAM_KERNEL_MODULE = "vllm.v1.attention.ops.prefix_prefill"
OVERLAY_KERNEL_MODULE = "vllm_overlay.v1.attention.ops.prefix_prefill"


def arm_kernel(state: InstallState) -> None:
    def swap(module: ModuleType) -> None:
        try:
            _swap(module, state)
        except Exception as exc:  # never fail vLLM's own import
            state.problems.append(f"kernel swap failed: {exc!r}")
            logger.warning("vllm-overlay: prefix-prefill kernel not swapped: %r", exc)

    after_import(CALLER_MODULE, swap)


def _swap(module: ModuleType, state: InstallState) -> None:
    from vllm_overlay.v1.attention.ops import prefix_prefill

    ours = prefix_prefill.context_attention_fwd
    current = getattr(module, "context_attention_fwd", None)
    if current is ours:
        state.kernel = "overlay"
        return
    if getattr(current, "__module__", None) != UPSTREAM_KERNEL_MODULE:
        problem = (
            f"{CALLER_MODULE}.context_attention_fwd is not vLLM's prefix-prefill "
            "kernel; kernel not swapped"
        )
        state.problems.append(problem)
        logger.warning("vllm-overlay: %s", problem)
        return
    theirs = list(inspect.signature(current).parameters)
    mine = list(inspect.signature(ours).parameters)
    if theirs != mine:
        problem = (
            f"vLLM's context_attention_fwd takes {theirs}, not {mine}; not swapped"
        )
        state.problems.append(problem)
        logger.warning("vllm-overlay: %s", problem)
        return
    module.context_attention_fwd = ours
    state.kernel = "overlay"
    logger.info(
        "vllm-overlay: using the overlay's prefix-prefill kernel (%s)", KERNEL_ENV
    )
