"""The ``vllm.general_plugins`` entry point: install the fix at vLLM start-up.

vLLM calls :func:`register` in every process it starts, possibly more than
once, on every platform. It never breaks start-up: outside strict mode every
failure becomes a warning, logged when vLLM imports ``rocm_attn`` (ROCm),
and vLLM runs as it would without the overlay. On platforms that never load
``rocm_attn`` (CUDA, CPU) it logs nothing above debug level.

Environment:

* ``VLLM_OVERLAY_DISABLE=1``: do nothing.
* ``VLLM_OVERLAY_STRICT=1``: raise when the installed vLLM's code is not
  recognised (or the overlay fails), instead of warning.
* ``VLLM_OVERLAY_PREFIX_PREFILL=1``: opt in to the overlay's capture-safe
  prefix-prefill Triton kernel (see :mod:`vllm_overlay.kernel_switch`).
"""

from __future__ import annotations

import os

from vllm_overlay.install import (
    UPSTREAM_MODULE,
    Action,
    InstallState,
    arm,
    assess,
    logger,
    vllm_version,
    warn_when_loaded,
)
from vllm_overlay.kernel_switch import KERNEL_ENV, arm_kernel

DISABLE_ENV = "VLLM_OVERLAY_DISABLE"
STRICT_ENV = "VLLM_OVERLAY_STRICT"
_TRUE = {"1", "true", "yes", "on"}

_state: InstallState | None = None


class OverlayStrictError(RuntimeError):
    """Strict mode: the overlay could not recognise or fix the installed vLLM."""


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def current_state() -> InstallState | None:
    """What :func:`register` did in this process (None: not called yet)."""
    return _state


def register() -> None:
    """Entry point called by ``vllm.plugins.load_general_plugins``.

    Logs at debug level only: registration happens on every platform, and
    the fix matters only where vLLM loads ``rocm_attn`` (ROCm). The import
    hook logs "installed" (info) or why the code was left alone (warning)
    at that moment.
    """
    global _state
    if _state is not None:
        return
    strict = env_flag(STRICT_ENV)
    if env_flag(DISABLE_ENV):
        _state = InstallState(Action.DISABLED, vllm_version(), f"{DISABLE_ENV} is set")
        logger.debug("vllm-overlay: disabled by %s", DISABLE_ENV)
        return
    try:
        state = assess()
        if state.action is Action.UNRECOGNISED and strict:
            raise OverlayStrictError(
                f"vllm-overlay: nothing done on vLLM {state.vllm_version}: "
                f"{state.reason}"
            )
        if state.action is Action.INSTALLED:
            arm(state)
        elif state.action is Action.UNRECOGNISED:
            warn_when_loaded(state)
        if env_flag(KERNEL_ENV):
            arm_kernel(state)
    except OverlayStrictError:
        raise
    except Exception as exc:
        _state = InstallState(
            Action.UNRECOGNISED, vllm_version(), f"overlay failed: {exc!r}"
        )
        if strict:
            raise OverlayStrictError(_state.reason) from exc
        logger.debug("vllm-overlay: %s", _state.reason)
        try:
            warn_when_loaded(_state)
        except Exception:
            logger.warning("vllm-overlay: %s", _state.reason)
        return
    _state = state
    if state.action is Action.INSTALLED:
        logger.debug(
            "vllm-overlay: armed on vLLM %s; when vLLM imports %s: %s",
            state.vllm_version,
            UPSTREAM_MODULE,
            state.reason,
        )
    else:
        logger.debug(
            "vllm-overlay: %s on vLLM %s: %s",
            state.action,
            state.vllm_version,
            state.reason,
        )
